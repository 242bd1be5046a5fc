"""The trade-off slider and the planner: built once, updated in place, errors shown under the figure."""
import pytest

from widgets.controls.research_planner import make_planner_widget, plan_lines
from widgets.controls.research_tradeoff import make_tradeoff_widget, tradeoff_line
from widgets.research.critical_batch import Tradeoff
from widgets.research.planner import PlannerModel

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
    with pytest.raises(ValueError, match="start"):
        make_tradeoff_widget(POINTS, FIT, start=-1)


def test_planner_answers_and_survives_a_budget_below_the_fixed_terms():
    measured = PlannerModel("tiny", 1_000_000_000, 1e8, 1e7, overhead_s=0.001, per_example_s=0.0005)
    w = make_planner_widget(measured, model="tiny", budget_gb=2.0, target=8)
    assert "b = 8, K = 1" in w.lines[-1] and "ms per update" in w.lines[-1]
    w.controls["budget_gb"].value = 0.5  # below the fixed 1 GB: no plan, a message, the widget stays live
    assert "exceed the budget" in w.lines[-1] and w.errors.outputs == ()
    w.controls["recompute"].value = True
    w.controls["budget_gb"].value = 1.5
    assert "b = 8" in w.lines[-1]
    assert _text(w).startswith("PlannerWidget: tiny")


def test_planner_presets_and_bad_input():
    model = make_planner_widget().models["GPT-2 small"]
    assert "b = 16, K = 4" in plan_lines(model, 24.0, 64, False)[-1]
    with pytest.raises(ValueError, match="model"):
        make_planner_widget(model="13B")
    with pytest.raises(ValueError, match="target"):
        make_planner_widget(target=3)
    with pytest.raises(ValueError, match="budget_gb"):
        make_planner_widget(budget_gb=0)
    with pytest.raises(TypeError, match="measured"):
        make_planner_widget(measured="tiny")
