"""researcher_2's plot draws one line per norm layer onto the Axes it is given."""
import matplotlib

matplotlib.use("Agg")
import pytest  # noqa: E402
from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from widgets.lessons.researcher_2.draw import draw_norm_gaps  # noqa: E402


def _axes():
    figure = Figure()
    FigureCanvasAgg(figure)
    return figure.subplots()


def test_norm_gaps_draw_one_line_per_norm():
    ax = _axes()
    lines = draw_norm_gaps(ax, [1, 2], {"batch": [0.0, 0.1], "layer": [0.0, 1e-16]})
    assert set(lines) == {"batch", "layer"}
    assert all(line.axes is ax for line in lines.values())


@pytest.mark.parametrize("call, exc, match", [
    (lambda ax: draw_norm_gaps("ax", [1], {"batch": [1.0]}), TypeError, "ax must be"),
    (lambda ax: draw_norm_gaps(ax, [1, 2, 4], {"batch": [1.0]}), ValueError, "batch"),
])
def test_bad_input_names_the_parameter(call, exc, match):
    with pytest.raises(exc, match=match):
        call(_axes())
