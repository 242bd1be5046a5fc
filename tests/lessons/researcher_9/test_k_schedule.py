"""K schedules: the warm-up rule, the runs it drives (B_simple read through a hook from the lab's loop), and
the update counting a learning-rate schedule needs when K changes."""
from __future__ import annotations

import inspect
import json
import math
from pathlib import Path

import pytest
import torch

from widgets.lessons.researcher_9.adam_k import AdamHyper, make_regression
from widgets.lessons.researcher_9.k_schedule import (
    COUNTINGS, KRun, next_k, scheduler_after_train_loop, scheduler_positions, train_k_schedule,
)
from widgets.research.noise_scale import estimate_noise_scale

NOTEBOOK = Path(__file__).resolve().parents[3] / "notebooks" / "researcher_9_adam_when_k_changes.ipynb"
SMALL = AdamHyper(0.008, 0.9, 0.999, 1e-8)


def test_the_notebook_shows_the_rule_it_runs():
    cells = ["".join(c["source"]) for c in json.loads(NOTEBOOK.read_text())["cells"] if c["cell_type"] == "code"]
    assert sum(inspect.getsource(next_k).rstrip("\n") in cell for cell in cells) == 1


@pytest.mark.parametrize("b_simple, k_now, expected", [
    (10.0, 2, 2),      # 10 examples = 1.25 micro-batches of 8: K stays
    (40.0, 2, 5),      # 5 micro-batches
    (1e9, 2, 16),      # capped at k_max
    (math.inf, 2, 16),  # |G|^2 estimated <= 0: noise swamps the signal
    (math.nan, 3, 3),  # no estimate: K stays
    (-5.0, 3, 3),      # a negative estimate never lowers K
    (16.0, 4, 4),      # a warm-up never falls
])
def test_next_k_follows_b_simple_never_falls_and_stops_at_k_max(b_simple, k_now, expected):
    assert next_k(b_simple, 8, k_now, 16) == expected


def test_fixed_k_never_changes_and_warm_up_only_grows():
    stream = make_regression(dim=8, noise_std=3.0, distance=2.0, examples=2048, seeds=1)
    fixed = train_k_schedule(stream, 0, SMALL, 8, 2, 2, target=1e-9, warm_up=False)
    assert set(fixed.ks) == {2} and fixed.reached is None and fixed.examples[-1] == 2048
    warm = train_k_schedule(stream, 0, SMALL, 8, 2, 16, target=1e-9)
    assert warm.ks[:10] == [2] * 10  # it settles first
    assert all(a <= b for a, b in zip(warm.ks, warm.ks[1:])) and max(warm.ks) > 2
    assert warm.examples == [sum(warm.ks[:i + 1]) * 8 for i in range(len(warm.ks))]
    assert len(warm.b_simple) == len(warm.losses) == len(warm.ks)


def test_a_run_stops_at_the_target():
    stream = make_regression(dim=8, noise_std=3.0, distance=2.0, examples=4096, seeds=1)
    run = train_k_schedule(stream, 0, SMALL, 8, 2, 8, target=1.0)
    assert isinstance(run, KRun) and run.reached == len(run.ks) - 1
    assert run.losses[-1] <= 1.0 < min(run.losses[:-1])
    assert run.examples_to_target == run.examples[-1] and run.updates_to_target == len(run.ks)


def test_the_hook_hands_the_estimator_each_micro_batch_gradient(monkeypatch):
    """The first window's B_simple equals the estimator on micro-batch gradients taken by plain autograd."""
    stream = make_regression(dim=4, noise_std=2.0, distance=1.0, examples=64, seeds=1)
    run = train_k_schedule(stream, 0, SMALL, 4, 4, 4, target=1e-9, warm_up=False)
    w = stream.w0[0].clone().requires_grad_(True)
    grads = []
    for i in range(0, 16, 4):
        loss = (stream.x[0, i:i + 4] @ w - stream.y[0, i:i + 4]).pow(2).mean()
        grads.append(torch.autograd.grad(loss, w)[0].double())
    expected = estimate_noise_scale(torch.stack(grads), 4).b_simple
    assert run.b_simple[0] == pytest.approx(expected, rel=1e-5)


def test_bad_arguments_are_named():
    stream = make_regression(dim=4, noise_std=1.0, distance=1.0, examples=64, seeds=2)
    with pytest.raises(ValueError, match="k_start must be"):
        train_k_schedule(stream, 0, SMALL, 4, 1, 4, 0.1)
    with pytest.raises(ValueError, match="k_max must be"):
        train_k_schedule(stream, 0, SMALL, 4, 4, 2, 0.1)
    with pytest.raises(ValueError, match="seed_index must be"):
        train_k_schedule(stream, 2, SMALL, 4, 2, 4, 0.1)


def test_counting_updates_survives_a_change_of_k():
    ks = [4] * 6 + [8] * 4
    assert scheduler_positions(ks, "updates") == list(range(1, 11))
    assert scheduler_positions(ks, "micro_steps")[-1] == sum(ks) == 56
    divided = scheduler_positions(ks, "micro_steps // K")
    assert divided[5:7] == [6, 4]  # jumps back when K doubles
    assert scheduler_positions([8, 8, 2], "micro_steps // K") == [1, 2, 9]  # and skips ahead when K falls
    assert set(COUNTINGS) == {"updates", "micro_steps", "micro_steps // K"}
    with pytest.raises(ValueError, match="counting must be"):
        scheduler_positions(ks, "epochs")
    with pytest.raises(ValueError, match="ks must be"):
        scheduler_positions([4, 0], "updates")


def test_the_lab_loop_steps_the_scheduler_once_per_update_whatever_k():
    ks = [2, 2, 4, 8]
    assert scheduler_after_train_loop(ks) == len(ks)
    assert scheduler_after_train_loop(ks, bug=True) == sum(ks)
