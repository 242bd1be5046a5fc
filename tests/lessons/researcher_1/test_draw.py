"""researcher_1's plots draw onto the Axes they are given, return their lines, and label the H200 rows as measured there."""
import matplotlib

matplotlib.use("Agg")
import pytest  # noqa: E402
from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from widgets.lessons.researcher_1.draw import (  # noqa: E402
    H200_LABEL,
    draw_precision_curves,
    draw_spread_gap,
)
from widgets.research.anchors import anchor_rows  # noqa: E402


def _axes():
    figure = Figure()
    FigureCanvasAgg(figure)
    return figure.subplots()


def test_spread_gap_draws_one_line_per_normaliser():
    ax = _axes()
    lines = draw_spread_gap(ax, {"spread": [0, 0.5, 1], "per_micro_batch": [0.0, 1e-3, 1e-2], "window": [1e-16] * 3})
    assert set(lines) == {"per_micro_batch", "window"}
    assert list(lines["per_micro_batch"].get_ydata())[0] > 0  # an exact zero is drawn on the log axis
    assert all(line.axes is ax for line in lines.values())


def test_precision_curves_put_the_h200_rows_beside_and_say_so():
    ax = _axes()
    ks = [1, 2, 4]
    lines = draw_precision_curves(ax, ks, {"float32": [1e-7] * 3, "bf16_params": [1e-3, 2e-3, 4e-3]},
                                  anchors=anchor_rows("precision"))
    h200 = [name for name in lines if name.startswith("h200:")]
    assert sorted(h200) == ["h200:bf16_autocast", "h200:bf16_params", "h200:fp16_autocast_scaled", "h200:fp32"]
    assert all(H200_LABEL in lines[name].get_label() for name in h200)
    assert all("this CPU" in lines[name].get_label() for name in ("float32", "bf16_params"))
    assert lines["h200:fp32"].get_linestyle() == "--"


@pytest.mark.parametrize("call, exc, match", [
    (lambda ax: draw_spread_gap("ax", {}), TypeError, "ax must be"),
    (lambda ax: draw_spread_gap(ax, {"window": [1]}), ValueError, "spread"),
    (lambda ax: draw_precision_curves(ax, [1, 2], {"float32": [1.0]}), ValueError, "float32"),
])
def test_bad_input_names_the_parameter(call, exc, match):
    with pytest.raises(exc, match=match):
        call(_axes())
