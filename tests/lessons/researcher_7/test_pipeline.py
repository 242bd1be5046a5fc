"""The schedule simulator against the bubble formula on a grid of (p, m), the activations each stage holds,
and a real pipeline of stage modules whose gradient is allclose to the unsplit model's (and not when a
micro-batch's backward is dropped or its loss left unweighted)."""
import inspect
import json
from pathlib import Path

import pytest
import torch

from widgets.core.accumulation import GRAD_ATOL, GRAD_RTOL
from widgets.lessons.researcher_7.pipeline import (
    SCHEDULES, bubble_formula, gpipe_two_stages, make_micro_batches, make_mlp, run_pipeline, simulate, split_model, stage_order,
    unsplit_gradient,
)

NOTEBOOK = Path(__file__).resolve().parents[3] / "notebooks" / "researcher_7_shards_and_stages.ipynb"
GRID = [(p, m) for p in range(1, 9) for m in range(1, 33)]


@pytest.mark.parametrize("schedule", SCHEDULES)
def test_bubble_measured_on_the_grid_equals_the_formula(schedule):
    for p, m in GRID:
        t = simulate(schedule, p, m)
        assert t.bubble_fraction == pytest.approx(bubble_formula(p, m), abs=1e-12), (p, m)
        assert t.makespan == 2 * (m + p - 1)


@pytest.mark.parametrize("schedule", SCHEDULES)
def test_every_operation_runs_once_and_after_its_input(schedule):
    for p, m in [(1, 1), (3, 5), (4, 2), (8, 16)]:
        t = simulate(schedule, p, m)
        start = {(op.kind, op.stage, op.micro_batch): op.start for op in t.ops}
        assert len(start) == len(t.ops) == 2 * p * m
        assert len({(op.stage, op.start) for op in t.ops}) == len(t.ops)  # one operation per stage per slot
        for (kind, s, i), slot in start.items():
            if kind == "F" and s > 0:
                assert slot >= start[("F", s - 1, i)] + 1
            if kind == "B":
                assert slot >= start[("B", s + 1, i) if s < p - 1 else ("F", s, i)] + 1


def test_activations_held_gpipe_m_and_1f1b_p_minus_stage():
    for p, m in GRID:
        assert simulate("gpipe", p, m).peak_in_flight() == [m] * p
        assert simulate("1f1b", p, m).peak_in_flight() == [min(p - s, m) for s in range(p)]


def test_1f1b_order():
    assert stage_order("1f1b", 0, 2, 3) == [("F", 0), ("F", 1), ("B", 0), ("F", 2), ("B", 1), ("B", 2)]
    assert stage_order("1f1b", 1, 2, 3) == [("F", 0), ("B", 0), ("F", 1), ("B", 1), ("F", 2), ("B", 2)]


def test_bubble_formula_values():
    assert bubble_formula(1, 5) == 0
    assert bubble_formula(4, 8) == pytest.approx(3 / 11)
    assert bubble_formula(2, 1) == pytest.approx(1 / 2)


@pytest.mark.parametrize("schedule", SCHEDULES)
@pytest.mark.parametrize("stages, micro_batches", [(1, 1), (2, 1), (2, 4), (4, 3), (4, 8)])
def test_pipeline_gradient_allclose_to_the_unsplit_model(schedule, stages, micro_batches):
    model = make_mlp(depth=4, width=8, seed=1)
    batches = make_micro_batches(micro_batches, 3, width=8, seed=2)
    reference = unsplit_gradient(model, batches)
    timeline = simulate(schedule, stages, micro_batches)
    run = run_pipeline(split_model(model, stages), batches, timeline)
    assert torch.allclose(run.gradient, reference, rtol=GRAD_RTOL, atol=GRAD_ATOL)
    assert run.peak_in_flight == timeline.peak_in_flight()  # what the real run held is what the grid says


def test_uneven_micro_batches_are_weighted_by_their_share():
    model = make_mlp(depth=2, width=8)
    batches = make_micro_batches(3, 4, width=8) + [tuple(t[:1] for t in make_micro_batches(1, 4, width=8, seed=5)[0])]
    reference = unsplit_gradient(model, batches)
    run = run_pipeline(split_model(model, 2), batches, simulate("1f1b", 2, 4))
    assert torch.allclose(run.gradient, reference, rtol=GRAD_RTOL, atol=GRAD_ATOL)


def test_the_oracle_catches_a_dropped_micro_batch():
    model = make_mlp(depth=2, width=8)
    batches = make_micro_batches(4, 3, width=8)
    reference = unsplit_gradient(model, batches)
    timeline = simulate("gpipe", 2, 4)
    dropped = type(timeline)(timeline.schedule, 2, 4, tuple(op for op in timeline.ops
                                                             if not (op.kind == "B" and op.micro_batch == 3)))
    run = run_pipeline(split_model(model, 2), batches, dropped)
    assert not torch.allclose(run.gradient, reference, rtol=GRAD_RTOL, atol=GRAD_ATOL)


def test_split_model_shares_parameters():
    model = make_mlp(depth=4)
    stages = split_model(model, 3)
    assert [len(s) for s in stages] == [1, 2, 1]
    assert {id(p) for s in stages for p in s.parameters()} == {id(p) for p in model.parameters()}


def test_bad_input():
    with pytest.raises(ValueError, match="schedule must be one of"):
        simulate("zero-bubble", 2, 2)
    with pytest.raises(ValueError, match="stages must be a whole number from 1 to 64"):
        simulate("gpipe", 0, 2)
    with pytest.raises(TypeError, match="micro_batches must be a whole number"):
        simulate("gpipe", 2, 2.5)
    with pytest.raises(ValueError, match="stages must be a whole number from 1 to 4"):
        split_model(make_mlp(depth=4), 5)
    with pytest.raises(ValueError, match="the timeline is for 2 stages and 3 micro-batches"):
        run_pipeline(split_model(make_mlp(), 2), make_micro_batches(4, 2), simulate("gpipe", 2, 3))


@pytest.mark.parametrize("micro_batches, sizes", [(1, [3]), (4, [3, 3, 3, 3]), (3, [4, 4, 1])])
def test_the_two_stage_loop_shown_in_the_notebook_is_the_unsplit_gradient(micro_batches, sizes):
    model = make_mlp(depth=3, width=8, seed=3)
    batches = [(x[:size], y[:size]) for (x, y), size in zip(make_micro_batches(micro_batches, 4, width=8), sizes)]
    reference = unsplit_gradient(model, batches)
    gpipe_two_stages(*split_model(model, 2), batches)
    grad = torch.cat([p.grad.reshape(-1) for p in model.parameters()])
    assert torch.allclose(grad, reference, rtol=GRAD_RTOL, atol=GRAD_ATOL)
    source = inspect.getsource(gpipe_two_stages).rstrip("\n")
    cells = ["".join(c["source"]) for c in json.loads(NOTEBOOK.read_text())["cells"] if c["cell_type"] == "code"]
    assert sum(source in cell for cell in cells) == 1


@pytest.mark.parametrize("schedule", SCHEDULES)
def test_a_backward_of_two_slots_keeps_the_bubble_share(schedule):
    for p in range(1, 7):
        for m in range(1, 17):
            t = simulate(schedule, p, m, backward_slots=2)
            assert t.makespan == 3 * (m + p - 1)  # every slot stretched: 3 slots of work per micro-batch
            assert abs(t.bubble_fraction - bubble_formula(p, m)) < 1e-12
            assert sum(op.slots for op in t.ops) == 3 * p * m


def test_split_backward_fills_idle_slots_with_the_weights_gradient():
    for p in range(2, 7):
        for m in range(1, 17):
            whole = simulate("1f1b", p, m, backward_slots=2)
            split = simulate("1f1b", p, m, backward_slots=2, split_backward=True)
            assert {op.kind for op in split.ops} == {"F", "B", "W"}
            assert sum(op.slots for op in split.ops) == sum(op.slots for op in whole.ops)  # the same work
            assert split.bubble_fraction < whole.bubble_fraction
            if m >= p:  # enough micro-batches for the W's to fill the fill and the drain: p - 1 idle slots left
                assert abs(split.bubble_fraction - (p - 1) / (3 * m + p - 1)) < 1e-12
            for op in split.ops:  # a W after its own B, a B after the next stage's B (or the last forward)
                if op.kind == "W":
                    b = next(o for o in split.ops if (o.kind, o.stage, o.micro_batch) == ("B", op.stage, op.micro_batch))
                    assert b.end <= op.start
            assert split.peak_in_flight() == [m] * p  # activations held until each W: GPipe's memory
    with pytest.raises(ValueError, match="backward_slots"):
        simulate("1f1b", 2, 2, backward_slots=1, split_backward=True)  # nothing left for W
