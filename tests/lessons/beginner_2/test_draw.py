"""Drawing functions draw onto the Axes they are given and return the artists they made."""
import matplotlib

matplotlib.use("Agg")
import pytest  # noqa: E402
from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from widgets.core.config import AccumulationConfig  # noqa: E402
from widgets.draw.style import FastCanvas  # noqa: E402
from widgets.lessons.beginner_2.draw import (  # noqa: E402
    draw_gradient_pile,
    draw_loss_curves,
    update_gradient_pile,
    update_loss_curves,
)
from widgets.core.training import REGIMES, run_regimes  # noqa: E402


@pytest.fixture(scope="module")
def records():
    small = run_regimes(AccumulationConfig(accumulation_steps=2, micro_batch_size=4, num_updates=3))
    large = run_regimes(AccumulationConfig(accumulation_steps=6, micro_batch_size=4, num_updates=3))
    return small, large


def _axes():
    figure = Figure()
    FigureCanvasAgg(figure)
    return figure, figure.subplots()


def test_pile_lines_follow_the_record(records):
    small, large = records
    figure, ax = _axes()
    artists = draw_gradient_pile(small, ax)
    assert len(artists.piles) == len(small.plotted_parameters) and all(line.axes is ax for line in artists.piles)
    assert len(artists.piles[0].get_xdata()) == 3  # the empty pile, then K = 2 micro-steps
    update_gradient_pile(large, ax, artists)
    assert len(artists.piles[0].get_xdata()) == 7
    index = list(large.plotted_parameters.values())[0]
    assert artists.targets[0].get_ydata()[0] == pytest.approx(float(large.first_target[index]))


def test_loss_curves_one_line_per_regime(records):
    small, large = records
    figure, ax = _axes()
    lines = draw_loss_curves(small, ax)
    assert set(lines) == set(REGIMES)
    styles = {(line.get_color(), line.get_linestyle(), line.get_marker()) for line in lines.values()}
    assert len(styles) == 3  # colour, dash and marker all differ: readable without colour
    update_loss_curves(large, ax, lines)
    assert list(lines["accumulated"].get_ydata()) == [large.initial_eval_loss] + large.eval_loss["accumulated"]


def test_fast_canvas_blits_until_a_limit_changes(records):
    small, _ = records
    figure, ax = _axes()
    lines = draw_loss_curves(small, ax)
    canvas = FastCanvas(figure, list(lines.values()))
    first = canvas.png()
    assert first.startswith(b"\x89PNG") and canvas.full_redraws == 1
    lines["accumulated"].set_ydata([0.0] * len(lines["accumulated"].get_xdata()))
    second = canvas.png()
    assert canvas.full_redraws == 1 and second != first  # blitted, and the picture changed
    limits = ax.get_ylim()
    ax.set_ylim(0, 10)
    canvas.png()
    assert canvas.full_redraws == 2
    ax.set_ylim(*limits)  # back to limits seen before: their background is still cached
    assert canvas.png() == second and canvas.full_redraws == 2


def test_the_pile_axis_spans_k_rounded_up_to_a_power_of_two():
    """Neighbouring K share one x axis (a slider step blits), and the K micro-steps fill at least half of it."""
    figure, ax = _axes()
    for K, span in ((1, 1), (3, 4), (4, 4), (5, 8), (9, 16), (16, 16)):
        record = run_regimes(AccumulationConfig(accumulation_steps=K, micro_batch_size=2, num_updates=1))
        draw_gradient_pile(record, ax)
        assert ax.get_xlim() == (-0.3, span + 0.3), K
