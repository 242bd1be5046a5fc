"""The across-ranks drawing draws onto the Axes it is given and returns its lines."""
import pytest
from matplotlib.figure import Figure

from widgets.lessons.researcher_6.draw import draw_imbalance_gap


def test_draws_one_line_per_loop_with_zeros_floored():
    ax = Figure().subplots()
    lines = draw_imbalance_gap(ax, [1, 2, 4], {"per_rank_mean": [0.0, 0.3, 0.7], "all_reduce_count": [1e-16] * 3})
    assert set(lines) == {"per_rank_mean", "all_reduce_count"}
    assert list(lines["per_rank_mean"].get_ydata()) == [1e-17, 0.3, 0.7]
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"


def test_bad_input():
    with pytest.raises(TypeError, match="ax"):
        draw_imbalance_gap("ax", [1], {"per_rank_mean": [0.1]})
