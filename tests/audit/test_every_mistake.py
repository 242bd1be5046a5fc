"""Every mistake the auditor can name is named, alone, for a loop that makes it.

Each loop below is written out in full, independently, and makes one mistake (marked `# BUG`);
the test asserts the EXACT set of names the auditor reports, so a false finding fails as surely
as a missed one. The truth the auditor compares against is plain autograd on the same problem
(tests/audit/test_instruments.py and test_problems.py check that). Loops with one structural
mistake (a skipped backward, steps shifted by one) must get that finding and no other.
"""
import pytest
import torch

from widgets.audit import audit_training_loop
from widgets.core.mistakes import EVERY_MISTAKE
from widgets.core.accumulation import IGNORE_INDEX


def ends_update(i, K, n):
    return (i + 1) % K == 0 or i + 1 == n


def group_size(i, K, n):
    return min(K, n - i // K * K)


def example_share(batches, i, K):
    """n_i / n: micro-batch i's share of its update's examples (1/K for K equal micro-batches; the
    auditor's last micro-batch holds fewer, as a DataLoader with drop_last=False leaves it)."""
    start = i // K * K
    return len(batches[i][1]) / sum(len(y) for _, y in batches[start : start + K])


# ----------------------------------------------------------------------------- the loss scale


def loss_not_divided(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    n = len(batches)
    for i, (x, y) in enumerate(batches):
        loss_fn(model(x), y).backward()  # BUG
        if ends_update(i, accumulation_steps, n):
            optimizer.step()
            optimizer.zero_grad()


def loss_divided_twice(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    n = len(batches)
    for i, (x, y) in enumerate(batches):
        share = example_share(batches, i, accumulation_steps)
        (loss_fn(model(x), y) * share * share).backward()  # BUG
        if ends_update(i, accumulation_steps, n):
            optimizer.step()
            optimizer.zero_grad()


def loss_sum_reduction(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    n = len(batches)
    for i, (x, y) in enumerate(batches):
        loss = torch.nn.functional.mse_loss(model(x), y, reduction="sum")  # BUG
        (loss * example_share(batches, i, accumulation_steps)).backward()
        if ends_update(i, accumulation_steps, n):
            optimizer.step()
            optimizer.zero_grad()


def wrong_loss_scale(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    n = len(batches)
    for i, (x, y) in enumerate(batches):
        (loss_fn(model(x), y) * example_share(batches, i, accumulation_steps) * 0.9).backward()  # BUG: 0.9 x
        if ends_update(i, accumulation_steps, n):
            optimizer.step()
            optimizer.zero_grad()


def tail_divided_by_k(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    n = len(batches)
    for i, (x, y) in enumerate(batches):
        (loss_fn(model(x), y) / accumulation_steps).backward()  # BUG in the short final group
        if ends_update(i, accumulation_steps, n):
            optimizer.step()
            optimizer.zero_grad()


# ----------------------------------------------------------------------------- the structure


def tail_dropped(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    full = len(batches) - len(batches) % accumulation_steps
    for i, (x, y) in enumerate(batches[:full]):  # BUG: the short final group is left out
        (loss_fn(model(x), y) / accumulation_steps).backward()
        if (i + 1) % accumulation_steps == 0:
            optimizer.step()
            optimizer.zero_grad()


def skips_one_backward(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    n = len(batches)
    for i, (x, y) in enumerate(batches):
        loss = loss_fn(model(x), y) * example_share(batches, i, accumulation_steps)
        if i != 5:  # BUG: micro-batch 5 never goes through backward
            loss.backward()
        if ends_update(i, accumulation_steps, n):
            optimizer.step()
            optimizer.zero_grad()


def backward_twice(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    n = len(batches)
    for i, (x, y) in enumerate(batches):
        loss = loss_fn(model(x), y) * example_share(batches, i, accumulation_steps)
        loss.backward(retain_graph=True)
        if i == 2:
            loss.backward()  # BUG: a second pass on the same loss
        if ends_update(i, accumulation_steps, n):
            optimizer.step()
            optimizer.zero_grad()


def one_backward_per_update(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    n, total = len(batches), 0
    for i, (x, y) in enumerate(batches):
        total = total + loss_fn(model(x), y) * example_share(batches, i, accumulation_steps)
        if ends_update(i, accumulation_steps, n):
            total.backward()  # BUG: one backward for K graphs kept alive: no memory saved (the gradient is right)
            optimizer.step()
            optimizer.zero_grad()
            total = 0


def steps_at_group_start(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    for i, (x, y) in enumerate(batches):
        (loss_fn(model(x), y) * example_share(batches, i, accumulation_steps)).backward()
        if i % accumulation_steps == 0:  # BUG: the first micro-step of each group, not the last
            optimizer.step()
            optimizer.zero_grad()


def step_every_micro_step(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    n = len(batches)
    for i, (x, y) in enumerate(batches):
        (loss_fn(model(x), y) * example_share(batches, i, accumulation_steps)).backward()
        optimizer.step()  # BUG
        if ends_update(i, accumulation_steps, n):
            optimizer.zero_grad()


def forget_final_step(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    logged, losses = [], []
    for i, (x, y) in enumerate(batches):
        loss = loss_fn(model(x), y)
        share = example_share(batches, i, accumulation_steps)
        (loss * share).backward()
        losses.append(loss.item() * share)
        if (i + 1) % accumulation_steps == 0:  # BUG: the short final group never steps
            optimizer.step()
            optimizer.zero_grad()
            logged.append(sum(losses))  # one value per step it takes: not a second mistake
            losses = []
    return logged


def never_steps(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    n = len(batches)
    for i, (x, y) in enumerate(batches):
        (loss_fn(model(x), y) * example_share(batches, i, accumulation_steps)).backward()
        if ends_update(i, accumulation_steps, n):
            optimizer.zero_grad()  # BUG: no optimizer.step()


def never_calls_backward(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    n = len(batches)
    for i, (x, y) in enumerate(batches):
        loss_fn(model(x), y)  # BUG: no backward
        if ends_update(i, accumulation_steps, n):
            optimizer.step()
            optimizer.zero_grad()


# ----------------------------------------------------------------------------- .grad


def zero_grad_every_micro_step(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    n = len(batches)
    for i, (x, y) in enumerate(batches):
        optimizer.zero_grad()  # BUG
        (loss_fn(model(x), y) * example_share(batches, i, accumulation_steps)).backward()
        if ends_update(i, accumulation_steps, n):
            optimizer.step()


def zero_grad_missing(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    n = len(batches)
    for i, (x, y) in enumerate(batches):
        (loss_fn(model(x), y) * example_share(batches, i, accumulation_steps)).backward()
        if ends_update(i, accumulation_steps, n):
            optimizer.step()  # BUG: no zero_grad after it


def zero_grad_before_step(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    n = len(batches)
    for i, (x, y) in enumerate(batches):
        (loss_fn(model(x), y) * example_share(batches, i, accumulation_steps)).backward()
        if ends_update(i, accumulation_steps, n):
            optimizer.zero_grad()  # BUG: before the step
            optimizer.step()


def grad_modified(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    n = len(batches)
    for i, (x, y) in enumerate(batches):
        (loss_fn(model(x), y) * example_share(batches, i, accumulation_steps)).backward()
        with torch.no_grad():
            model.weight.grad[0, 0] += 0.1  # BUG: a nudge to one entry of the pile
        if ends_update(i, accumulation_steps, n):
            optimizer.step()
            optimizer.zero_grad()


def extra_loss_term(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    n = len(batches)
    for i, (x, y) in enumerate(batches):
        loss = loss_fn(model(x), y) + 0.01 * model.weight.square().sum()  # BUG: a penalty K times per update
        (loss * example_share(batches, i, accumulation_steps)).backward()
        if ends_update(i, accumulation_steps, n):
            optimizer.step()
            optimizer.zero_grad()


def another_loss(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    n = len(batches)
    for i, (x, y) in enumerate(batches):
        loss = torch.nn.functional.l1_loss(model(x), y)  # BUG: not the loss handed in
        (loss * example_share(batches, i, accumulation_steps)).backward()
        if ends_update(i, accumulation_steps, n):
            optimizer.step()
            optimizer.zero_grad()


def differs_from_reference(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    n = len(batches)
    for i, (x, y) in enumerate(batches):
        (loss_fn(model(x), y) * example_share(batches, i, accumulation_steps)).backward()
        if ends_update(i, accumulation_steps, n):
            optimizer.step()
            optimizer.zero_grad()
    with torch.no_grad():
        model.weight.mul_(0.5)  # BUG: the weights changed outside the optimizer


def loop_raised(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    for x, y in batches:
        loss_fn(model(x), y).backward()
        raise RuntimeError("stopped")  # BUG


# ----------------------------------------------------------------------------- clipping


def clip_every_micro_step(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    n = len(batches)
    for i, (x, y) in enumerate(batches):
        (loss_fn(model(x), y) * example_share(batches, i, accumulation_steps)).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)  # BUG: on the half-built pile
        if ends_update(i, accumulation_steps, n):
            optimizer.step()
            optimizer.zero_grad()


def clip_missing(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    n = len(batches)
    for i, (x, y) in enumerate(batches):
        (loss_fn(model(x), y) * example_share(batches, i, accumulation_steps)).backward()
        if ends_update(i, accumulation_steps, n):
            optimizer.step()  # BUG: clip_norm = 1.0 was promised
            optimizer.zero_grad()


def clip_norm_differs(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    n = len(batches)
    for i, (x, y) in enumerate(batches):
        (loss_fn(model(x), y) * example_share(batches, i, accumulation_steps)).backward()
        if ends_update(i, accumulation_steps, n):
            torch.nn.utils.clip_grad_norm_(model.parameters(), 2.0)  # BUG: the audit says 1.0
            optimizer.step()
            optimizer.zero_grad()


def undivided_but_clipped(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    n = len(batches)
    for i, (x, y) in enumerate(batches):
        loss_fn(model(x), y).backward()  # BUG: clipping hides it here, not with a larger clip_norm
        if ends_update(i, accumulation_steps, n):
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            optimizer.zero_grad()


def clips_unannounced(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    n = len(batches)
    for i, (x, y) in enumerate(batches):
        (loss_fn(model(x), y) * example_share(batches, i, accumulation_steps)).backward()
        if ends_update(i, accumulation_steps, n):
            torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)  # BUG: the audit was given no clip_norm
            optimizer.step()
            optimizer.zero_grad()


# ----------------------------------------------------------------------------- the scheduler


def scheduler_every_micro_step(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    n = len(batches)
    for i, (x, y) in enumerate(batches):
        (loss_fn(model(x), y) * example_share(batches, i, accumulation_steps)).backward()
        if ends_update(i, accumulation_steps, n):
            optimizer.step()
            optimizer.zero_grad()
        scheduler.step()  # BUG


def scheduler_wrong_count(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    n = len(batches)
    for i, (x, y) in enumerate(batches):
        (loss_fn(model(x), y) * example_share(batches, i, accumulation_steps)).backward()
        if ends_update(i, accumulation_steps, n):
            optimizer.step()
            optimizer.zero_grad()
    scheduler.step()  # BUG: once, at the end


def scheduler_before_step(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    n = len(batches)
    for i, (x, y) in enumerate(batches):
        (loss_fn(model(x), y) * example_share(batches, i, accumulation_steps)).backward()
        if ends_update(i, accumulation_steps, n):
            scheduler.step()  # BUG: before the optimizer
            optimizer.step()
            optimizer.zero_grad()


# ----------------------------------------------------------------------------- the log


def log_divided_loss(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    n, logged, total = len(batches), [], 0.0
    for i, (x, y) in enumerate(batches):
        share = example_share(batches, i, accumulation_steps)
        loss = loss_fn(model(x), y) * share
        loss.backward()
        total += loss.item()
        if ends_update(i, accumulation_steps, n):
            optimizer.step()
            optimizer.zero_grad()
            logged.append(total / (i % accumulation_steps + 1))  # BUG: the divided losses, averaged again
            total = 0.0
    return logged


def log_last_micro_batch(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    n, logged = len(batches), []
    for i, (x, y) in enumerate(batches):
        loss = loss_fn(model(x), y)
        (loss * example_share(batches, i, accumulation_steps)).backward()
        if ends_update(i, accumulation_steps, n):
            optimizer.step()
            optimizer.zero_grad()
            logged.append(loss.item())  # BUG: the last micro-batch only
    return logged


def log_wrong(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    n, logged = len(batches), []
    for i, (x, y) in enumerate(batches):
        loss = loss_fn(model(x), y)
        (loss * example_share(batches, i, accumulation_steps)).backward()
        logged.append(loss.item())  # BUG: one value per micro-step
        if ends_update(i, accumulation_steps, n):
            optimizer.step()
            optimizer.zero_grad()
    return logged


def bad_return_value(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    n = len(batches)
    for i, (x, y) in enumerate(batches):
        (loss_fn(model(x), y) * example_share(batches, i, accumulation_steps)).backward()
        if ends_update(i, accumulation_steps, n):
            optimizer.step()
            optimizer.zero_grad()
    return model  # BUG: not a list of numbers


# ----------------------------------------------------------------------------- tokens and streams


def token_mean_per_micro_batch(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    n = len(batches)
    for i, (x, y) in enumerate(batches):
        loss = loss_fn(model(x), y)  # this micro-batch's token mean
        (loss / group_size(i, accumulation_steps, n)).backward()  # BUG: averaged over the micro-batches
        if ends_update(i, accumulation_steps, n):
            optimizer.step()
            optimizer.zero_grad()


def padding_counted(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    for start in range(0, len(batches), accumulation_steps):
        window = batches[start : start + accumulation_steps]
        positions = sum(y.numel() for _, y in window)  # BUG: padding positions counted
        for x, y in window:
            (loss_fn(model(x), y, reduction="sum") / positions).backward()
        optimizer.step()
        optimizer.zero_grad()


def streaming_tail_dropped(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    group = []
    for batch in batches:
        group.append(batch)
        if len(group) == accumulation_steps:
            for x, y in group:
                (loss_fn(model(x), y) / accumulation_steps).backward()
            optimizer.step()
            optimizer.zero_grad()
            group = []
    # BUG: what is left in `group` when the stream ends is never used


# ----------------------------------------------------------------------------- steps twice, AMP, memory, time


def step_twice(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    n = len(batches)
    for i, (x, y) in enumerate(batches):
        (loss_fn(model(x), y) * example_share(batches, i, accumulation_steps)).backward()
        if ends_update(i, accumulation_steps, n):
            optimizer.step()
            optimizer.step()  # BUG: the same pile applied again
            optimizer.zero_grad()


def amp_step_twice(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    scaler, n = torch.amp.GradScaler("cpu"), len(batches)
    for i, (x, y) in enumerate(batches):
        scaler.scale(loss_fn(model(x), y) * example_share(batches, i, accumulation_steps)).backward()
        if ends_update(i, accumulation_steps, n):
            scaler.step(optimizer)
            optimizer.step()  # BUG: scaler.step already stepped
            scaler.update()
            optimizer.zero_grad()


def amp_clip_before_unscale(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    scaler, n = torch.amp.GradScaler("cpu"), len(batches)
    for i, (x, y) in enumerate(batches):
        scaler.scale(loss_fn(model(x), y) * example_share(batches, i, accumulation_steps)).backward()
        if ends_update(i, accumulation_steps, n):
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)  # BUG: clips the scaled gradient
            scaler.unscale_(optimizer)
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad()


def amp_no_unscale(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    scaler, n = torch.amp.GradScaler("cpu"), len(batches)
    for i, (x, y) in enumerate(batches):
        scaler.scale(loss_fn(model(x), y) * example_share(batches, i, accumulation_steps)).backward()
        if ends_update(i, accumulation_steps, n):
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)  # BUG: no scaler.unscale_ before it
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad()


def amp_update_every_micro_step(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    scaler, n = torch.amp.GradScaler("cpu"), len(batches)
    for i, (x, y) in enumerate(batches):
        scaler.scale(loss_fn(model(x), y) * example_share(batches, i, accumulation_steps)).backward()
        if ends_update(i, accumulation_steps, n):
            scaler.step(optimizer)
            optimizer.zero_grad()
        scaler.update()  # BUG: every micro-step


def retains_graphs_in_a_running_loss(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    n, logged, total = len(batches), [], 0.0
    for i, (x, y) in enumerate(batches):
        share = example_share(batches, i, accumulation_steps)
        loss = loss_fn(model(x), y)
        (loss * share).backward(retain_graph=True)  # BUG: the graph outlives its backward ...
        total = total + loss * share  # ... and the running loss, not detached, holds every one of them
        if ends_update(i, accumulation_steps, n):
            optimizer.step()
            optimizer.zero_grad()
            logged.append(float(total))
            total = 0.0
    return logged


def time_limit(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    x, y = batches[0]
    while True:  # BUG: never ends
        loss_fn(model(x), y)


CLIP, SCHEDULER, TOKENS = dict(clip_norm=1.0), dict(with_scheduler=True), dict(problem="tokens")
NEW_CASES = [  # found by a review: each named alone, with and without an uneven final group
    (step_twice, {}, {"step_twice"}),
    (amp_step_twice, {}, {"amp_step_twice"}),
    (amp_clip_before_unscale, CLIP, {"amp_clip_before_unscale"}),
    (amp_no_unscale, CLIP, {"amp_no_unscale"}),
    (amp_update_every_micro_step, {}, {"amp_update_every_micro_step"}),
    (one_backward_per_update, {}, {"graphs_kept_alive"}),
    (retains_graphs_in_a_running_loss, {}, {"graphs_kept_alive"}),
    (time_limit, dict(time_limit_s=0.3), {"time_limit"}),
]


@pytest.mark.parametrize("loop, options, names", NEW_CASES, ids=[loop.__name__ for loop, _, _ in NEW_CASES])
@pytest.mark.parametrize("K", [4, 3])
@pytest.mark.parametrize("tail", [True, False], ids=["uneven_tail", "no_tail"])
def test_the_reviewed_mistakes_are_named_alone(loop, options, names, K, tail):
    report = audit_training_loop(loop, K, num_batches=2 * K + (K // 2 if tail else 0), **options)
    assert report.mistakes == names, str(report)
    assert len(report.findings) == len(names)


def test_a_second_step_in_a_row_is_named_not_a_crash():
    report = audit_training_loop(step_twice, 4)
    assert report.counts["optimizer.step()"] == (6, 3)
    assert "steps [1, 3, 5] came right after another, applying the same pile again" in report.findings[0]


def test_the_graphs_kept_are_counted_not_read_from_the_source():
    report = audit_training_loop(retains_graphs_in_a_running_loss, 4)
    assert "up to 4 micro-batches' graphs were held at once" in report.findings[0]
    assert report.update_ratios == pytest.approx([1, 1, 1])  # the gradients are right: only memory is lost
    assert "every update used the reference gradient, but the loop differs from the reference elsewhere" \
        in str(report)


def test_amp_findings_give_the_norm_the_step_used():
    report = audit_training_loop(amp_clip_before_unscale, 4, clip_norm=1.0)
    assert "stepped with norm 1.53e-05, clip_norm is 1" in report.findings[0]
    assert "Fix: call scaler.unscale_(optimizer) first, then clip" in report.findings[0]


CASES = [  # (loop, audit options, the exact set of names)
    (loss_not_divided, {}, {"loss_not_divided"}),
    (loss_divided_twice, {}, {"loss_divided_twice"}),
    (loss_sum_reduction, {}, {"loss_sum_reduction"}),
    (wrong_loss_scale, {}, {"wrong_loss_scale"}),
    (tail_divided_by_k, {}, {"tail_divided_by_k"}),
    (tail_dropped, {}, {"tail_dropped"}),
    (skips_one_backward, {}, {"backward_count"}),
    (backward_twice, {}, {"backward_count"}),
    (one_backward_per_update, {}, {"graphs_kept_alive"}),
    (steps_at_group_start, {}, {"wrong_step_positions"}),
    (step_every_micro_step, {}, {"step_every_micro_step"}),
    (forget_final_step, {}, {"forget_final_step"}),
    (never_steps, {}, {"never_steps"}),
    (never_calls_backward, {}, {"never_calls_backward"}),
    (zero_grad_every_micro_step, {}, {"zero_grad_every_micro_step"}),
    (zero_grad_missing, {}, {"zero_grad_missing"}),
    (zero_grad_before_step, {}, {"zero_grad_before_step"}),
    (grad_modified, {}, {"grad_modified"}),
    (extra_loss_term, {}, {"unexpected_gradient"}),
    (another_loss, {}, {"unexpected_gradient"}),
    (differs_from_reference, {}, {"differs_from_reference"}),
    (loop_raised, {}, {"loop_raised"}),
    (clip_every_micro_step, CLIP, {"clip_every_micro_step"}),
    (clip_missing, CLIP, {"clip_missing"}),
    (clip_norm_differs, CLIP, {"clip_norm_differs"}),
    (undivided_but_clipped, CLIP, {"loss_not_divided"}),
    (clips_unannounced, {}, {"clip_norm_differs"}),
    (scheduler_every_micro_step, SCHEDULER, {"scheduler_every_micro_step"}),
    (scheduler_wrong_count, SCHEDULER, {"scheduler_wrong_count"}),
    (scheduler_before_step, SCHEDULER, {"scheduler_before_step"}),
    (log_divided_loss, {}, {"log_divided_loss"}),
    (log_last_micro_batch, {}, {"log_last_micro_batch"}),
    (log_wrong, {}, {"log_wrong"}),
    (bad_return_value, {}, {"bad_return_value"}),
    (token_mean_per_micro_batch, TOKENS, {"normalised_per_micro_batch"}),
    (padding_counted, TOKENS, {"padding_counted"}),
    (streaming_tail_dropped, {}, {"tail_dropped"}),
]
IDS = [loop.__name__ for loop, _, _ in CASES]


@pytest.mark.parametrize("loop, options, names", CASES, ids=IDS)
@pytest.mark.parametrize("K", [4, 3])
def test_the_one_mistake_is_named_and_nothing_else(loop, options, names, K):
    report = audit_training_loop(loop, K, **options)
    assert report.mistakes == names, str(report)
    assert len(report.findings) == len(names)


def test_every_name_the_auditor_can_report_has_a_loop_that_triggers_it():
    every = CASES + NEW_CASES + UNEVEN_CASES + BYPASS_CASES
    # problem="rl" (tests/audit/test_rl_problem.py), world_size > 1 (tests/audit/test_ranks.py) and the field's
    # loops (tests/audit/test_field_loops.py)
    elsewhere = {"per_micro_batch_normaliser", "divided_by_group_twice", "per_rank_normaliser", "ranks_divided_twice",
                 "grpo_sequence_mean", "count_all_reduced_per_micro_batch", "lr_scaled_instead_of_loss",
                 "learning_rate_changed", "steps_by_hand", "replaced_functions",
                 "no_sync_every_micro_step",  # the DDP form (tests/audit/test_ddp.py)
                 "clip_by_value", "hook_never_removed"}  # round four (tests/audit/test_round_four.py)
    researcher_2 = {"ema_every_micro_step", "decay_every_micro_step"}  # named by its run, not by the auditor
    assert set().union(elsewhere, researcher_2, *(names for _, _, names in every)) == set(EVERY_MISTAKE)


def test_a_skipped_backward_says_which_micro_batch_and_no_zero_grad_finding():
    report = audit_training_loop(skips_one_backward, 4)
    assert "micro-batches [5] never went through backward()" in report.findings[0]
    assert report.counts["backward passes"] == (9, 10)


def test_steps_at_the_group_start_are_placed_in_micro_batch_terms():
    report = audit_training_loop(steps_at_group_start, 4)
    assert "steps after micro-batches [0, 4, 8], the reference after [3, 7, 9]" in report.findings[0]


def test_the_token_finding_says_how_much_a_token_weighs():
    report = audit_training_loop(token_mean_per_micro_batch, 4, problem="tokens")
    assert "real tokens; the window holds" in report.findings[0]
    assert "Fix: weight each micro-batch's mean loss by its share n_i/n of the update's examples (real tokens)" \
        in report.findings[0]


def test_ignore_index_is_what_the_token_batches_use():
    assert IGNORE_INDEX == -100  # torch's default for cross_entropy: learners' loops use it as written


@pytest.mark.parametrize("loop, options, names", CASES + NEW_CASES, ids=IDS + [c[0].__name__ for c in NEW_CASES])
def test_every_sentence_agrees_with_the_numbers_beside_it(loop, options, names):
    report = audit_training_loop(loop, 4, **options)
    text, ratios = str(report), report.update_ratios
    all_one = len(ratios) == 3 and ratios == pytest.approx([1.0] * 3)  # 10 micro-batches, K = 4: 3 updates
    assert ("Verdict: differs from the reference." in text) == (not all_one and not report.matches_reference)
    assert ("every update used the reference gradient" in text) == (all_one and not report.matches_reference)
    if "come out right" in text:
        assert all_one


def test_the_undivided_loss_is_said_n_times_too_big_as_the_ratios_show():
    report = audit_training_loop(loss_not_divided, 4)
    assert report.update_ratios[:2] == pytest.approx([4, 4])  # the last update, 2 uneven micro-batches: no one ratio
    assert "an update of n equal micro-batches is n x too big" in report.findings[0]


# ----------------------------------------------------------------------------- the short last micro-batch


def divides_by_micro_batches(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    n, logged, losses = len(batches), [], []
    for i, (x, y) in enumerate(batches):
        share = example_share(batches, i, accumulation_steps)
        loss = loss_fn(model(x), y)
        (loss / group_size(i, accumulation_steps, n)).backward()  # BUG: 1/n per micro-batch, not n_i/n
        losses.append(loss.item() * share)
        if ends_update(i, accumulation_steps, n):
            optimizer.step()
            optimizer.zero_grad()
            logged.append(sum(losses))
            losses = []
    return logged


def logs_a_plain_mean(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    n, logged, losses = len(batches), [], []
    for i, (x, y) in enumerate(batches):
        loss = loss_fn(model(x), y)
        (loss * example_share(batches, i, accumulation_steps)).backward()
        losses.append(loss.item())
        if ends_update(i, accumulation_steps, n):
            optimizer.step()
            optimizer.zero_grad()
            logged.append(sum(losses) / len(losses))  # BUG: a short micro-batch's examples weigh more
            losses = []
    return logged


def window_in_one_pass(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    logged = []
    for start in range(0, len(batches), accumulation_steps):
        window = batches[start : start + accumulation_steps]
        x, y = torch.cat([x for x, _ in window]), torch.cat([y for _, y in window])  # BUG: K x the activations
        loss = loss_fn(model(x), y)  # the mean over the window's examples: the right gradient
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        logged.append(loss.item())
    return logged


UNEVEN_CASES = [  # the auditor's last micro-batch holds fewer examples, as drop_last=False leaves it
    (divides_by_micro_batches, {}, {"normalised_per_micro_batch"}),
    (logs_a_plain_mean, {}, {"log_plain_mean"}),
    (window_in_one_pass, {}, {"window_in_one_pass"}),
    (window_in_one_pass, TOKENS, {"window_in_one_pass"}),
]


@pytest.mark.parametrize("loop, options, names", UNEVEN_CASES, ids=[f"{c[0].__name__}-{i}"
                                                                    for i, c in enumerate(UNEVEN_CASES)])
@pytest.mark.parametrize("K", [4, 3])
@pytest.mark.parametrize("num_batches", ["two_in_the_tail", "no_tail"])
def test_a_short_last_micro_batch_shows_what_equal_ones_hide(loop, options, names, K, num_batches):
    N = 2 * K + 2 if num_batches == "two_in_the_tail" else 2 * K  # the short micro-batch shares its update
    report = audit_training_loop(loop, K, num_batches=N, **options)
    assert report.mistakes == names, str(report)
    assert len(report.findings) == len(names)


def test_the_short_last_micro_batch_is_in_the_report_and_in_the_sentence():
    report = audit_training_loop(divides_by_micro_batches, 4)  # 10 micro-batches of 5, the last of 2
    assert "10 micro-batches of 5 examples (the last of 2)" in str(report)
    assert "weighted its micro-batch mean losses by [0.5, 0.5], their shares n_i/n of its 7 examples are " \
           "[0.714, 0.286]" in report.findings[0]
    window = audit_training_loop(window_in_one_pass, 4)
    assert "micro-batches [0, 1, 2, 3] concatenated, 20 examples at once where a micro-batch holds 5" \
        in window.findings[0]


# ----------------------------------------------------------------------------- forwards around the module


def _bypassing(forward):
    def loop(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
        n = len(batches)
        for i, (x, y) in enumerate(batches):
            loss_fn(forward(model, x), y).backward()  # BUG: undivided
            if ends_update(i, accumulation_steps, n):
                optimizer.step()
                optimizer.zero_grad()
    loop.__name__ = forward.__name__
    return loop


def module_forward(model, x):
    return model.forward(x)  # no hooks run


def functional_linear(model, x):
    return torch.nn.functional.linear(x, model.weight)


def matmul_transposed(model, x):
    return x @ model.weight.T


BYPASS_CASES = [(_bypassing(f), {}, {"loss_not_divided"}) for f in (module_forward, functional_linear,
                                                                    matmul_transposed)]


@pytest.mark.parametrize("loop, options, names", BYPASS_CASES, ids=[c[0].__name__ for c in BYPASS_CASES])
@pytest.mark.parametrize("K", [4, 3])
def test_a_forward_that_bypasses_the_modules_hooks_is_still_seen(loop, options, names, K):
    report = audit_training_loop(loop, K, **options)
    assert report.mistakes == names, str(report)


def test_a_window_concatenated_around_the_module_is_still_seen():
    def cat_and_matmul(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
        for start in range(0, len(batches), accumulation_steps):
            window = batches[start : start + accumulation_steps]
            x, y = torch.cat([x for x, _ in window]), torch.cat([y for _, y in window])
            loss_fn(x @ model.weight.T, y).backward()  # BUG: the window in one pass
            optimizer.step()
            optimizer.zero_grad()

    for K in (3, 4):
        assert audit_training_loop(cat_and_matmul, K).mistakes == {"window_in_one_pass"}


@pytest.mark.parametrize("loop, options, names", UNEVEN_CASES + BYPASS_CASES,
                         ids=[f"{c[0].__name__}-{i}" for i, c in enumerate(UNEVEN_CASES + BYPASS_CASES)])
def test_the_sentences_of_the_new_cases_agree_with_their_numbers(loop, options, names):
    test_every_sentence_agrees_with_the_numbers_beside_it(loop, options, names)
