"""researcher_3's trade-off slider: built once, updated in place, errors shown under the figure."""
import pytest

from widgets.lessons.researcher_3.controls import make_tradeoff_widget, tradeoff_line
from widgets.lessons.researcher_3.critical_batch import Tradeoff

FIT = Tradeoff(10.0, 320.0)


def _text(widget) -> str:
    bundle = widget._repr_mimebundle_()
    return (bundle[0] if isinstance(bundle, tuple) else bundle)["text/plain"]


POINTS = [(4, 90.0), (16, 30.0), (64, 15.0)]


def test_tradeoff_widget_moves_its_marker():
    w = make_tradeoff_widget(POINTS, FIT)
    assert "2.00 x S_min" in w.text and _text(w).startswith("TradeoffWidget: K·b = 32")
    figure = w.figure
    w.slider.value = 128.0
    assert w.figure is figure and "K·b = 128" in w.text
    assert w.artists["marker"].get_data()[1][0] == pytest.approx(FIT.steps(128))
    assert tradeoff_line(FIT, 32).endswith("B_crit = 32")


def test_tradeoff_bad_input():
    with pytest.raises(TypeError, match="fit"):
        make_tradeoff_widget(POINTS, None)
    with pytest.raises(ValueError, match="points"):
        make_tradeoff_widget(POINTS[:1], FIT)
