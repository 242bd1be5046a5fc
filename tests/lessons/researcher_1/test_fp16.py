"""float16 loss scaling under accumulation: the loop researcher_1 shows, against plain autograd and GradScaler's
own bookkeeping; the variant that steps the schedule always runs one update ahead after a skip."""
import inspect
import json
from pathlib import Path

import pytest
import torch

from widgets.lessons.researcher_1.fp16 import (
    float64_gradient, fp16_diff, fp16_problem, train_fp16, train_fp16_schedule_always,
)

NOTEBOOK = Path(__file__).resolve().parents[3] / "notebooks" / "researcher_1_why_exact.ipynb"


def weights(model):
    return torch.nn.utils.parameters_to_vector(model.parameters()).detach().clone()


def run(loop, updates=5, overflow_at=(2, 1), K=3, seed=0):
    """Each window through `loop` on its own; per update (S used, weights moved, lr after)."""
    model, windows = fp16_problem(updates, K, 8, overflow_at=overflow_at, seed=seed)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda u: (u + 1) / 8)
    scaler, out = torch.amp.GradScaler("cpu"), []
    for window in windows:
        before = weights(model)
        [(scale, lr)] = loop(model, optimizer, scheduler, scaler, [window])
        out.append((scale, not torch.equal(before, weights(model)), lr))
    return out


def test_a_cell_holds_the_loop():
    cells = ["".join(c["source"]) for c in json.loads(NOTEBOOK.read_text())["cells"] if c["cell_type"] == "code"]
    source = inspect.getsource(train_fp16).rstrip("\n")
    assert sum(source in cell for cell in cells) == 1
    assert len(source.splitlines()) <= 25, "the whole loop fits on one screen"


def test_float64_gradient_is_plain_autograd():
    model, (window,) = fp16_problem(1, 3, 5, seed=1)
    w, b = (p.detach().double().requires_grad_() for p in (model.weight, model.bias))
    x, y = (torch.cat(parts).double() for parts in zip(*window))
    torch.nn.functional.mse_loss(x @ w.T + b, y).backward()
    assert torch.allclose(float64_gradient(model, window), torch.cat([w.grad.reshape(-1), b.grad]),
                          rtol=1e-12, atol=1e-18)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_scaled_pile_is_s_times_the_gradient_and_unscaled_once_it_is_the_gradient(seed):
    model, (window,) = fp16_problem(1, 8, 32, seed=seed)
    true = float64_gradient(model, window)
    scaler, optimizer = torch.amp.GradScaler("cpu"), torch.optim.SGD(model.parameters(), lr=0.1)
    for inputs, targets in window:
        with torch.autocast("cpu", dtype=torch.float16):
            outputs = model(inputs)
        scaler.scale(torch.nn.functional.mse_loss(outputs.float(), targets) / len(window)).backward()
    pile = torch.cat([p.grad.reshape(-1) for p in model.parameters()]).double()
    assert abs(float(pile.norm() / true.norm()) / scaler.get_scale() - 1) < 1e-3
    scaler.unscale_(optimizer)
    unscaled = torch.cat([p.grad.reshape(-1) for p in model.parameters()]).double()
    assert float((unscaled - true).abs().max() / true.abs().max()) < 1e-3
    with pytest.raises(RuntimeError, match="unscale_"):  # a second unscale_ in one window is refused
        scaler.unscale_(optimizer)


def test_an_overflow_in_one_micro_step_skips_the_whole_update_and_halves_s_once():
    good = run(train_fp16)
    assert [moved for _, moved, _ in good] == [True, True, False, True, True]
    assert [s for s, _, _ in good] == [2.0**16] * 3 + [2.0**15] * 2


def test_the_schedule_counts_only_steps_taken_and_the_variant_runs_one_ahead():
    good, always = run(train_fp16), run(train_fp16_schedule_always)
    assert [m for _, m, _ in always] == [m for _, m, _ in good]  # the same weights' story in both
    assert [lr for _, _, lr in good] == pytest.approx([0.1 * n / 8 for n in (2, 3, 3, 4, 5)])
    assert [lr for _, _, lr in always] == pytest.approx([0.1 * n / 8 for n in (2, 3, 4, 5, 6)])


def test_without_an_overflow_both_loops_are_the_same():
    assert run(train_fp16, overflow_at=None) == run(train_fp16_schedule_always, overflow_at=None)


def test_the_diff_changes_only_the_scheduler_lines():
    changed = [line for line in fp16_diff().splitlines() if line.startswith(("+", "-"))]
    assert len(changed) == 3 and all("scheduler.step()" in line or "get_scale" in line for line in changed)


@pytest.mark.parametrize("kwargs, match", [
    (dict(updates=0, accumulation_steps=2, micro_batch_size=2), "updates"),
    (dict(updates=1, accumulation_steps=0, micro_batch_size=2), "accumulation_steps"),
    (dict(updates=1, accumulation_steps=2, micro_batch_size=0), "micro_batch_size"),
    (dict(updates=2, accumulation_steps=2, micro_batch_size=2, overflow_at=(2, 0)), "overflow_at"),
    (dict(updates=2, accumulation_steps=2, micro_batch_size=2, overflow_at=(0, 2)), "overflow_at"),
])
def test_bad_input_names_the_parameter(kwargs, match):
    with pytest.raises(ValueError, match=match):
        fp16_problem(**kwargs)


def test_sizes_past_the_ceiling_are_refused_before_allocating(before_allocating):
    from widgets.core.config import BudgetError
    with before_allocating(), pytest.raises(BudgetError, match=r"fp16_problem\(100, 256, 1024\)"):
        fp16_problem(100, 256, 1024)
