"""The noise-scale drawings draw onto the Axes they are given and return their artists."""
import math

import pytest
from matplotlib.figure import Figure

from widgets.lessons.researcher_3.draw import draw_best_learning_rate, draw_noise_over_training, draw_tradeoff
from widgets.lessons.researcher_3.critical_batch import NoiseRecord, Tradeoff

RECORD = NoiseRecord([1.0, 0.8, 0.7], [1.0, 0.5, 0.2], [10.0, 10.0, 10.0], [10.0, math.inf, 50.0],
                     [10.0, 15.0, 25.0])


def test_noise_over_training():
    ax1, ax2 = Figure().subplots(1, 2)
    drawn = draw_noise_over_training(RECORD, ax1, ax2)
    assert list(drawn["loss"].get_ydata()) == RECORD.losses
    assert len(drawn["dots"].get_offsets()) == 2  # the infinite window is left out
    assert ax2.get_yscale() == "log"


def test_tradeoff_marks_b_crit():
    ax = Figure().subplots()
    fit = Tradeoff(10.0, 320.0)
    drawn = draw_tradeoff([(8, 50.0), (64, 15.0)], fit, ax)
    x, y = drawn["marker"].get_data()
    assert x[0] == pytest.approx(fit.examples(32)) and y[0] == pytest.approx(20.0)


def test_best_learning_rate_and_bad_axes():
    ax = Figure().subplots()
    drawn = draw_best_learning_rate({4: [0.25, 0.5, 0.25], 8: [0.5, 1.0, 0.5]}, ax, diverging={4: [1.0, 1.4, 1.0],
                                                                                              8: [2.0, 2.0, 2.8]})
    assert list(drawn["median"].get_ydata()) == [0.25, 0.5]
    assert len(drawn["dots"].get_offsets()) == 6
    assert list(drawn["rule"].get_ydata()) == [0.25, 0.5]  # linear scaling from the median at the smallest B
    assert list(drawn["limit"].get_ydata()) == [1.0, 2.0]
    assert ax.get_xscale() == "log"
    with pytest.raises(ValueError, match="best"):
        draw_best_learning_rate({4: []}, ax)
    with pytest.raises(TypeError, match="ax"):
        draw_noise_over_training(RECORD, "ax", ax)
    with pytest.raises(TypeError, match="record"):
        draw_noise_over_training([], ax, ax)
