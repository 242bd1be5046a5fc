"""researcher_4's planner: built once, updated in place, errors shown under the figure."""
import pytest

from widgets.lessons.researcher_4.controls import make_planner_widget, plan_lines
from widgets.research.planner import PlannerModel


def _text(widget) -> str:
    bundle = widget._repr_mimebundle_()
    return (bundle[0] if isinstance(bundle, tuple) else bundle)["text/plain"]


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
    assert "b = 8, K = 8" in plan_lines(model, 24.0, 64, False)[-1]
    with pytest.raises(ValueError, match="model"):
        make_planner_widget(model="13B")
    with pytest.raises(ValueError, match="target"):
        make_planner_widget(target=3)
    with pytest.raises(ValueError, match="budget_gb"):
        make_planner_widget(budget_gb=0)
    with pytest.raises(TypeError, match="measured"):
        make_planner_widget(measured="tiny")


def test_planner_has_a_zero_column_per_stage_and_follows_the_chosen_layout():
    from widgets.research.planner import PRESETS, Sharding, zero_bytes_per_rank
    w = make_planner_widget(model="7B, SDPA attention", budget_gb=80.0, target=64, recompute=True)
    assert "exceed the budget" in w.lines[-1]  # 16 bytes per parameter alone are over 80 GB
    assert all(f"ZeRO-{s} GB/rank" in w.table.value for s in range(4))
    figure = w.figure
    w.controls["world_size"].value = 8
    w.controls["stage"].value = 3
    assert w.sharding() == Sharding(3, 8) and w.figure is figure
    assert "13.2 GB per rank (ZeRO-3" in w.lines[0] and "b = 16, K = 4" in w.lines[-1]  # b = 32: over 80 GB
    w.controls["grad_bytes"].value = 4
    w.controls["no_sync"].value = True  # the whole fp32 gradient on each rank
    p = PRESETS["7B"].parameters
    assert f"{zero_bytes_per_rank(p, 3, 8, 4, True)['total'] / 1e9:.3g} GB per rank" in w.lines[0]
    assert "no_sync" in w.lines[0] and w.errors.outputs == ()


def test_planner_lines_name_the_new_terms_and_leave_measured_models_unsharded():
    models = make_planner_widget().models
    lines = plan_lines(models["7B"], 141.0, 64, True)
    assert "the loss's working set 1.84 GB" in lines[1] and "one layer (rebuilt, then its gradients) 3.25 GB" in lines[1]
    assert "the tied embedding's gradient 0.262 GB" in lines[1]
    assert "b = 4, K = 16" in lines[-1]
    assert "b = 8, K = 8" in plan_lines(models["7B, SDPA attention"], 141.0, 64, True)[-1]
    measured = PlannerModel("tiny", 1_000_000_000, 1e8, 1e7)
    w = make_planner_widget(measured, model="tiny", budget_gb=2.0, target=8)
    w.controls["stage"].value = 3  # no parameter count: the ZeRO controls do not apply
    assert w.sharding() is None and "ZeRO" not in w.table.value and "per rank" not in w.lines[0]
