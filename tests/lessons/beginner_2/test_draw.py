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


# --- issue 36, point 6: the explorer in the beginner's words ----------------------------------------------

def test_plain_words_name_the_knobs_and_drop_the_code_names(records):
    small, _ = records
    for words, names in (("plain", ["knob A", "knob B", "knob C"]), ("detailed", list(small.plotted_parameters))):
        figure = Figure()
        FigureCanvasAgg(figure)
        pile_ax, loss_ax = figure.subplots(1, 2)
        draw_gradient_pile(small, pile_ax, words)
        draw_loss_curves(small, loss_ax, words)
        assert [t.get_text() for t in pile_ax.get_legend().get_texts()] == names
        assert ("MSE" in loss_ax.get_ylabel()) == (words == "detailed")
        assert ("weight" in " ".join(names)) == (words == "detailed")


def test_the_explorers_pile_label_stays_whole_beside_ticks_six_characters_wide():
    """The explorer's margins are fixed (it blits): its y label must fit left of the widest ticks, inside the picture."""
    from matplotlib.ticker import FixedLocator

    from widgets.lessons.beginner_2.controls import make_accumulation_explorer

    explorer = make_accumulation_explorer(accumulation_steps=4, micro_batch_size=2)
    ax, renderer = explorer._axes[0], explorer.figures[0].canvas.get_renderer()
    try:
        for ticks in ([-0.025, 0.0, 0.025], [-0.75, 0.0, 0.5], [-12.5, 0.0, 12.5], [0.0, 0.4]):
            ax.yaxis.set_major_locator(FixedLocator(ticks))
            ax.set_ylim(min(ticks), max(ticks))
            explorer.render(full=True)
            label = ax.yaxis.label.get_window_extent(renderer)
            left_tick = min(t.get_window_extent(renderer).x0 for t in ax.get_yticklabels() if t.get_text())
            assert 0 <= label.x0 and label.x1 < left_tick, (ticks, label, left_tick)
    finally:
        explorer.close()


def _plain(**settings) -> list[str]:
    from widgets.lessons.beginner_2.draw import readout_lines

    return readout_lines(run_regimes(AccumulationConfig(**settings)))


@pytest.mark.parametrize("K, b, update", [(7, 8, 4), (7, 2, 6)])
def test_a_run_that_blew_up_says_so_in_one_line_with_its_updates(K, b, update):
    lines = _plain(accumulation_steps=K, micro_batch_size=b, mistake="loss_not_divided")
    said = [line for line in lines if "blew up" in line or line.startswith("updates")]
    assert said == [f"updates: blew up at update {update}, so it made {update} of 8: lower the learning rate ✗"]


def test_a_loop_that_steps_too_often_still_counts_its_updates():
    lines = _plain(accumulation_steps=4, micro_batch_size=2, mistake="step_every_micro_step")
    assert "updates: 32 where the big batch makes 8 ✗" in lines and not any("blew up" in line for line in lines)
