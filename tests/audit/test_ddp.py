"""The auditor across ranks for a loop written for DDP: no `comm`, a model with `no_sync()`.

Each rank's backward() outside no_sync() averages its whole pile over the ranks, as DDP's all-reduce does, so
the truth is plain autograd on every rank's window together (the reference's), clipped after the mean. The
recipe developer_1 offers to copy (autocast, GradScaler, unscale_ then clip once, the scheduler stepped only
with the optimizer, no_sync on all but the window's last micro-step, windows from an iterator) passes at
K = 3 and 4, with and without a short tail; forgetting no_sync costs all-reduces (a note); never leaving it is
a mistake.
"""
import itertools
from contextlib import nullcontext

import pytest
import torch

from widgets.audit import audit_training_loop


def recipe(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None, max_norm=None):
    """Windows from an iterator; each micro-batch's mean loss x its share of the window's examples."""
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**8)
    micro_batches = iter(batches)
    while window := list(itertools.islice(micro_batches, accumulation_steps)):
        examples = sum(len(y) for _, y in window)
        for i, (x, y) in enumerate(window):
            last = i == len(window) - 1
            with (nullcontext() if last or not hasattr(model, "no_sync") else model.no_sync()):
                with torch.autocast("cpu", dtype=torch.bfloat16):
                    loss = loss_fn(model(x), y) * len(y) / examples
                scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        if max_norm is not None:
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
        scale = scaler.get_scale()
        scaler.step(optimizer)
        scaler.update()
        if scheduler is not None and scaler.get_scale() >= scale:  # stepped only when the optimizer stepped
            scheduler.step()
        optimizer.zero_grad()


def clipped(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    recipe(model, optimizer, loss_fn, batches, accumulation_steps, scheduler, max_norm=1.0)


def sync_every_micro_step(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    """Right, but without no_sync: every backward() all-reduces."""
    for start in range(0, len(batches), accumulation_steps):
        window = batches[start : start + accumulation_steps]
        examples = sum(len(y) for _, y in window)
        for x, y in window:
            (loss_fn(model(x), y) * len(y) / examples).backward()
        optimizer.step()
        optimizer.zero_grad()


def never_syncs(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    """Every micro-step under no_sync, the last of the window too."""
    for start in range(0, len(batches), accumulation_steps):
        window = batches[start : start + accumulation_steps]
        examples = sum(len(y) for _, y in window)
        for x, y in window:
            with model.no_sync():
                (loss_fn(model(x), y) * len(y) / examples).backward()
        optimizer.step()
        optimizer.zero_grad()


def undivided(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    for start in range(0, len(batches), accumulation_steps):
        window = batches[start : start + accumulation_steps]
        for i, (x, y) in enumerate(window):
            with nullcontext() if i == len(window) - 1 else model.no_sync():
                loss_fn(model(x), y).backward()
        optimizer.step()
        optimizer.zero_grad()


SHAPES = [(3, 7), (3, 6), (4, 10), (4, 8)]  # (K, micro-batches): a short tail and none


@pytest.mark.parametrize("K, N", SHAPES)
@pytest.mark.parametrize("world_size", [2, 3])
def test_the_recipe_passes(K, N, world_size):
    report = audit_training_loop(recipe, K, num_batches=N, world_size=world_size, with_scheduler=True)
    assert report.matches_reference, str(report)
    assert report.update_ratios and all(abs(r - 1) < 1e-6 for r in report.update_ratios), str(report)
    assert not any("all-reduces" in n for n in report.notes), str(report)


@pytest.mark.parametrize("K, N", SHAPES)
def test_the_recipe_clips_the_averaged_pile(K, N):
    report = audit_training_loop(clipped, K, num_batches=N, world_size=2, clip_norm=1.0, with_scheduler=True)
    assert report.matches_reference, str(report)
    # the same loop clipping nothing it should: named, not passed
    assert "clip_missing" in audit_training_loop(recipe, K, num_batches=N, world_size=2, clip_norm=1.0).mistakes


@pytest.mark.parametrize("K, N", SHAPES)
def test_a_loop_without_no_sync_is_right_and_told_its_cost(K, N):
    report = audit_training_loop(sync_every_micro_step, K, num_batches=N, world_size=2)
    assert report.matches_reference, str(report)
    assert any(n.startswith(f"{K} all-reduces in an update where 1 does") for n in report.notes), str(report)


@pytest.mark.parametrize("K, N", SHAPES)
def test_a_loop_that_never_syncs_is_named(K, N):
    report = audit_training_loop(never_syncs, K, num_batches=N, world_size=2)
    assert report.mistakes == {"no_sync_every_micro_step"}, str(report)
    assert "could not read" not in str(report)


@pytest.mark.parametrize("K, N", SHAPES)
def test_a_wrong_loss_scale_is_named_in_the_ddp_form(K, N):
    report = audit_training_loop(undivided, K, num_batches=N, world_size=2)
    assert report.mistakes == {"loss_not_divided"}, str(report)


def test_the_token_problem_runs_in_the_ddp_form():
    def token_mean(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
        for start in range(0, len(batches), accumulation_steps):
            window = batches[start : start + accumulation_steps]
            for i, (x, y) in enumerate(window):
                with nullcontext() if i == len(window) - 1 else model.no_sync():
                    (loss_fn(model(x), y) / len(window)).backward()
            optimizer.step()
            optimizer.zero_grad()

    report = audit_training_loop(token_mean, 3, problem="tokens", world_size=2)
    assert report.mistakes == {"normalised_per_micro_batch"}, str(report)
