"""Researcher 9's drawings draw onto the Axes they are given and return their artists."""
import pytest
from matplotlib.figure import Figure

from widgets.lessons.researcher_9.draw import draw_k_runs, draw_rule_gaps
from widgets.lessons.researcher_9.k_schedule import KRun

GAPS = {4: {"lr_only": [0.05, 0.04], "malladi": [0.06, 0.03]}, 16: {"lr_only": [0.2, 0.1]}}
RUNS = {"fixed": KRun([2, 2, 2], [16, 32, 48], [1.0, 0.5, 0.2], [10.0, 12.0, 15.0], 2),
        "warm": KRun([2, 4], [16, 48], [1.0, 0.3], [10.0, 40.0], None)}


def test_rule_gaps_one_bar_per_rule_and_k():
    ax = Figure().subplots()
    drawn = draw_rule_gaps(GAPS, ax)
    assert list(drawn) == ["lr_only", "malladi"]
    assert [bar.get_height() for bar in drawn["lr_only"]] == pytest.approx([0.045, 0.15])
    assert len(drawn["malladi"]) == 1  # no malladi bar at k = 16
    assert ax.get_yscale() == "log" and [t.get_text() for t in ax.get_xticklabels()] == ["k = 4", "k = 16"]


def test_k_runs_draw_k_and_loss_over_examples():
    ax_k, ax_loss = Figure().subplots(1, 2)
    drawn = draw_k_runs(RUNS, ax_k, ax_loss, target=0.25)
    k_line, loss_line = drawn["warm"]
    assert list(k_line.get_xdata()) == [16, 48] and list(k_line.get_ydata()) == [2, 4]
    assert list(loss_line.get_ydata()) == [1.0, 0.3]
    assert ax_loss.get_yscale() == "log"


def test_bad_input_is_named():
    with pytest.raises(TypeError, match="ax must be"):
        draw_rule_gaps(GAPS, "ax")
