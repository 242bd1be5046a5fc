"""Right loops, written in the ways people write them, pass with no finding at all.

A false finding misleads as much as a missed one: every variant below makes each update the
big-batch one, and the auditor must say so (for K = 4 and K = 3, uneven final group included).
"""
import contextlib

import pytest
import torch

from widgets.audit import audit_training_loop
from widgets.core.accumulation import IGNORE_INDEX


def share_of(batches, i, K):
    """n_i / n: micro-batch i's share of its update's examples (1/K for K equal micro-batches; the
    auditor's last micro-batch holds fewer, as a DataLoader with drop_last=False leaves it)."""
    start = i // K * K
    return len(batches[i][1]) / sum(len(y) for _, y in batches[start : start + K])


def examples_so_far(batches, i, K):
    """The examples of i's update up to and including micro-batch i."""
    return sum(len(y) for _, y in batches[i // K * K : i + 1])


def plain(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    n, logged, losses = len(batches), [], []
    for i, (x, y) in enumerate(batches):
        share = share_of(batches, i, accumulation_steps)
        loss = loss_fn(model(x), y)
        (loss * share).backward()
        losses.append(loss.item() * share)
        if (i + 1) % accumulation_steps == 0 or i + 1 == n:
            optimizer.step()
            if scheduler is not None:
                scheduler.step()
            optimizer.zero_grad()
            logged.append(sum(losses))  # the update's mean loss: each micro-batch's weighted n_i/n
            losses = []
    return logged


def zero_grad_at_group_start(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    n = len(batches)
    for i, (x, y) in enumerate(batches):
        if i % accumulation_steps == 0:
            model.zero_grad(set_to_none=False)  # empty the pile before the group, not after the step
        (loss_fn(model(x), y) * share_of(batches, i, accumulation_steps)).backward()
        if (i + 1) % accumulation_steps == 0 or i + 1 == n:
            optimizer.step()


def rescales_grad(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    n = len(batches)
    for i, (x, y) in enumerate(batches):
        (loss_fn(model(x), y) * len(y)).backward()  # the summed loss: the pile is a sum ...
        if (i + 1) % accumulation_steps == 0 or i + 1 == n:
            for p in model.parameters():
                p.grad /= examples_so_far(batches, i, accumulation_steps)  # ... divided once, by the examples
            optimizer.step()
            optimizer.zero_grad()


def clips_once(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    n = len(batches)
    for i, (x, y) in enumerate(batches):
        (loss_fn(model(x), y) * share_of(batches, i, accumulation_steps)).backward()
        if (i + 1) % accumulation_steps == 0 or i + 1 == n:
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            if scheduler is not None:
                scheduler.step()
            optimizer.zero_grad(set_to_none=True)


def rescales_grad_then_clips(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    n = len(batches)
    for i, (x, y) in enumerate(batches):
        (loss_fn(model(x), y) * len(y)).backward()
        if (i + 1) % accumulation_steps == 0 or i + 1 == n:
            model.weight.grad = model.weight.grad / examples_so_far(batches, i, accumulation_steps)  # assigned
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)  # then clipped, once, on the mean
            optimizer.step()
            optimizer.zero_grad()


def streams_by_groups(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    """No len(): collect a group, then run it knowing its size; the last, shorter one too."""
    logged, group = [], []

    def update(group):
        total, examples = 0.0, sum(len(y) for _, y in group)
        for x, y in group:
            loss = loss_fn(model(x), y)
            (loss * len(y) / examples).backward()
            total += loss.item() * len(y)
        optimizer.step()
        optimizer.zero_grad()
        logged.append(total / examples)

    for batch in batches:
        group.append(batch)
        if len(group) == accumulation_steps:
            update(group)
            group = []
    if group:
        update(group)
    return logged


def streams_one_ahead(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    """No len(): backward as the batches come, summed over examples; look one batch ahead to know the
    last, and divide the pile by the examples it holds when the update ends."""
    stream, in_group, examples = iter(batches), 0, 0
    current = next(stream, None)
    while current is not None:
        following = next(stream, None)
        x, y = current
        (loss_fn(model(x), y) * len(y)).backward()
        in_group, examples = in_group + 1, examples + len(y)
        if in_group == accumulation_steps or following is None:
            for p in model.parameters():
                p.grad /= examples
            optimizer.step()
            optimizer.zero_grad()
            in_group, examples = 0, 0
        current = following


def token_window(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    """Sum the token losses, divide by the window's real tokens, counted before the first backward."""
    logged = []
    for start in range(0, len(batches), accumulation_steps):
        window = batches[start : start + accumulation_steps]
        real_tokens = sum(int((y != IGNORE_INDEX).sum()) for _, y in window)
        total = 0.0
        for x, y in window:
            loss = loss_fn(model(x), y, reduction="sum")
            (loss / real_tokens).backward()
            total += loss.item()
        optimizer.step()
        optimizer.zero_grad()
        logged.append(total / real_tokens)
    return logged


def token_window_streamed(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    window = []

    def update(window):
        real_tokens = sum(int((y != IGNORE_INDEX).sum()) for _, y in window)  # before the first backward
        for x, y in window:
            (loss_fn(model(x), y, reduction="sum") / real_tokens).backward()
        optimizer.step()
        optimizer.zero_grad()

    for batch in batches:
        window.append(batch)
        if len(window) == accumulation_steps:
            update(window)
            window = []
    if window:
        update(window)


def token_mean_reweighted(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    """The mean-reduced loss, weighted by this micro-batch's share of the window's real tokens."""
    n = len(batches)
    for i, (x, y) in enumerate(batches):
        start = i - i % accumulation_steps
        window = batches[start : min(start + accumulation_steps, n)]
        share = int((y != IGNORE_INDEX).sum()) / sum(int((t != IGNORE_INDEX).sum()) for _, t in window)
        (loss_fn(model(x), y) * share).backward()
        if (i + 1) % accumulation_steps == 0 or i + 1 == n:
            optimizer.step()
            optimizer.zero_grad()


def summed_over_the_window(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    """Sum the squared errors and divide by the window's examples, counted before the first backward."""
    logged = []
    for start in range(0, len(batches), accumulation_steps):
        window = batches[start : start + accumulation_steps]
        examples, total = sum(len(y) for _, y in window), 0.0
        for x, y in window:
            loss = torch.nn.functional.mse_loss(model(x), y, reduction="sum")
            (loss / examples).backward()
            total += loss.item()
        optimizer.step()
        optimizer.zero_grad()
        logged.append(total / examples)
    return logged


def forwards_around_the_module(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    """The model run as model.forward(x), F.linear(x, model.weight) and x @ model.weight.T in turn."""
    n, logged, total = len(batches), [], 0.0
    ways = [lambda x: model.forward(x), lambda x: torch.nn.functional.linear(x, model.weight),
            lambda x: x @ model.weight.T]
    for i, (x, y) in enumerate(batches):
        loss = loss_fn(ways[i % 3](x), y)
        share = share_of(batches, i, accumulation_steps)
        (loss * share).backward()
        total += loss.item() * share
        if (i + 1) % accumulation_steps == 0 or i + 1 == n:
            optimizer.step()
            optimizer.zero_grad()
            logged.append(total)
            total = 0.0
    return logged


# ----------------------------------------------------------------------------- other ways to build the pile


def ends_update(i, K, n):
    return (i + 1) % K == 0 or i + 1 == n


def amp_unscale_clip_step(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    """GradScaler: scale, backward; at the boundary unscale_, clip, step, update."""
    scaler, n = torch.amp.GradScaler("cpu"), len(batches)
    for i, (x, y) in enumerate(batches):
        scaler.scale(loss_fn(model(x), y) * share_of(batches, i, accumulation_steps)).backward()
        if ends_update(i, accumulation_steps, n):
            scaler.unscale_(optimizer)  # clip the true gradient, not the scaled one
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad()


def amp_without_clipping(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    scaler, n = torch.amp.GradScaler("cpu"), len(batches)
    for i, (x, y) in enumerate(batches):
        scaler.scale(loss_fn(model(x), y) * share_of(batches, i, accumulation_steps)).backward()
        if ends_update(i, accumulation_steps, n):
            scaler.step(optimizer)  # unscales, then steps
            scaler.update()
            optimizer.zero_grad()


def running_mean_of_the_pile(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    """.grad holds the mean over the examples seen so far in the update: shrink it by seen/(seen + n_i),
    add the next micro-batch's mean x n_i/(seen + n_i)."""
    n = len(batches)
    for i, (x, y) in enumerate(batches):
        seen = examples_so_far(batches, i, accumulation_steps) - len(y)
        if seen > 0:
            with torch.no_grad():
                for p in model.parameters():
                    p.grad.mul_(seen / (seen + len(y)))
        (loss_fn(model(x), y) * len(y) / (seen + len(y))).backward()
        if ends_update(i, accumulation_steps, n):
            optimizer.step()
            optimizer.zero_grad()


def fp64_main_grad_buffer(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    """The pile kept in a separate buffer, .grad emptied after each backward, copied in at the boundary."""
    n, params = len(batches), list(model.parameters())
    main = [torch.zeros_like(p, dtype=torch.float64) for p in params]
    for i, (x, y) in enumerate(batches):
        (loss_fn(model(x), y) * share_of(batches, i, accumulation_steps)).backward()
        for buffer, p in zip(main, params):
            buffer += p.grad
            p.grad = None
        if ends_update(i, accumulation_steps, n):
            for buffer, p in zip(main, params):
                p.grad = buffer.to(p.dtype).clone()
                buffer.zero_()
            optimizer.step()
            optimizer.zero_grad()


def autograd_grad_into_a_pile(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    n, params, pile = len(batches), list(model.parameters()), None
    for i, (x, y) in enumerate(batches):
        grads = torch.autograd.grad(loss_fn(model(x), y) * share_of(batches, i, accumulation_steps), params)
        pile = list(grads) if pile is None else [a + g for a, g in zip(pile, grads)]
        if ends_update(i, accumulation_steps, n):
            for p, g in zip(params, pile):
                p.grad = g
            optimizer.step()
            optimizer.zero_grad()
            pile = None


def torch_func_grad_into_a_pile(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    n, pile = len(batches), None

    def loss_of(params, x, y):
        return loss_fn(torch.func.functional_call(model, params, (x,)), y)

    for i, (x, y) in enumerate(batches):
        params = {name: p.detach() for name, p in model.named_parameters()}
        grads = torch.func.grad(loss_of)(params, x, y)
        share = {k: g * share_of(batches, i, accumulation_steps) for k, g in grads.items()}
        pile = share if pile is None else {k: pile[k] + share[k] for k in pile}
        if ends_update(i, accumulation_steps, n):
            for name, p in model.named_parameters():
                p.grad = pile[name]
            optimizer.step()
            optimizer.zero_grad()
            pile = None


def torch_func_vmap_per_example(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    """Per-example gradients with vmap(grad), averaged: the mean-loss gradient, piled in .grad."""
    n = len(batches)

    def example_loss(params, x, y):
        return loss_fn(torch.func.functional_call(model, params, (x.unsqueeze(0),)), y.unsqueeze(0))

    for i, (x, y) in enumerate(batches):
        params = {name: p.detach() for name, p in model.named_parameters()}
        per_example = torch.func.vmap(torch.func.grad(example_loss), in_dims=(None, 0, 0))(params, x, y)
        for name, p in model.named_parameters():
            g = per_example[name].mean(0) * share_of(batches, i, accumulation_steps)
            p.grad = g if p.grad is None else p.grad + g
        if ends_update(i, accumulation_steps, n):
            optimizer.step()
            optimizer.zero_grad()


def grad_rescaled_with_foreach(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    n = len(batches)
    for i, (x, y) in enumerate(batches):
        (loss_fn(model(x), y) * len(y)).backward()  # the pile is a sum over examples ...
        if ends_update(i, accumulation_steps, n):
            grads = [p.grad for p in model.parameters()]
            torch._foreach_mul_(grads, 1 / examples_so_far(batches, i, accumulation_steps))  # ... made a mean
            optimizer.step()
            optimizer.zero_grad()


def no_sync_style_context(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    """DDP's pattern: skip the gradient sync on every micro-step but the last of an update."""
    n = len(batches)
    no_sync = getattr(model, "no_sync", contextlib.nullcontext)  # a plain module has none: nothing to skip
    for i, (x, y) in enumerate(batches):
        with contextlib.nullcontext() if ends_update(i, accumulation_steps, n) else no_sync():
            (loss_fn(model(x), y) * share_of(batches, i, accumulation_steps)).backward()
        if ends_update(i, accumulation_steps, n):
            optimizer.step()
            optimizer.zero_grad()


def steps_under_no_grad(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    n, logged, total = len(batches), [], 0.0
    for i, (x, y) in enumerate(batches):
        loss = loss_fn(model(x), y) * share_of(batches, i, accumulation_steps)
        loss.backward()
        total = total + loss  # not detached, but backward freed what its graph saved: no memory kept
        if ends_update(i, accumulation_steps, n):
            with torch.no_grad():
                optimizer.step()
                if scheduler is not None:
                    scheduler.step()
                optimizer.zero_grad()
            logged.append(float(total))
            total = 0.0
    return logged


OTHER_WAYS = [
    (amp_unscale_clip_step, dict(clip_norm=1.0)),
    (amp_without_clipping, {}),
    (running_mean_of_the_pile, {}),
    (fp64_main_grad_buffer, {}),
    (autograd_grad_into_a_pile, {}),
    (torch_func_grad_into_a_pile, {}),
    (torch_func_vmap_per_example, {}),
    (grad_rescaled_with_foreach, {}),
    (no_sync_style_context, {}),
    (steps_under_no_grad, dict(with_scheduler=True)),
]


@pytest.mark.parametrize("loop, options", OTHER_WAYS, ids=[loop.__name__ for loop, _ in OTHER_WAYS])
@pytest.mark.parametrize("K", [4, 3])
@pytest.mark.parametrize("tail", [True, False], ids=["uneven_tail", "no_tail"])
def test_a_right_loop_that_piles_another_way_gets_no_finding(loop, options, K, tail):
    report = audit_training_loop(loop, K, num_batches=2 * K + (K // 2 if tail else 0), **options)
    assert report.mistakes == set(), str(report)
    assert report.update_ratios == pytest.approx([1.0] * len(report.update_ratios)) and report.update_ratios
    assert "Verdict: matches the reference." in str(report)


def test_a_gradscaler_loop_gets_a_note_that_its_updates_are_right():
    report = audit_training_loop(amp_unscale_clip_step, 4, clip_norm=1.0)
    assert any("GradScaler" in note and "come out right" in note for note in report.notes)


VARIANTS = [
    (plain, dict(with_scheduler=True)),
    (zero_grad_at_group_start, {}),
    (rescales_grad, {}),
    (clips_once, dict(clip_norm=1.0, with_scheduler=True)),
    (rescales_grad_then_clips, dict(clip_norm=1.0)),
    (streams_by_groups, {}),
    (streams_one_ahead, {}),
    (token_window, dict(problem="tokens")),
    (token_window_streamed, dict(problem="tokens")),
    (token_mean_reweighted, dict(problem="tokens")),
    (summed_over_the_window, {}),
    (forwards_around_the_module, {}),
]


@pytest.mark.parametrize("loop, options", VARIANTS, ids=[loop.__name__ for loop, _ in VARIANTS])
@pytest.mark.parametrize("K", [4, 3, 1])
def test_a_right_loop_gets_no_finding(loop, options, K):
    report = audit_training_loop(loop, K, **options)
    assert report.mistakes == set(), str(report)
    assert report.update_ratios == pytest.approx([1.0] * len(report.update_ratios))


@pytest.mark.parametrize("num_batches", [8, 9, 1])
def test_with_or_without_an_uneven_final_group(num_batches):
    assert audit_training_loop(streams_by_groups, 4, num_batches=num_batches).matches_reference
    assert audit_training_loop(token_window, 4, num_batches=num_batches, problem="tokens").matches_reference


@pytest.mark.parametrize("K", [4, 3])
@pytest.mark.parametrize("num_batches", [None, "multiple"])
def test_the_lab_loop_passes_with_the_short_last_micro_batch_anywhere(K, num_batches):
    from widgets.core.loops import train_loop

    N = 2 * K if num_batches == "multiple" else None  # short micro-batch in a full update, or in the tail
    for problem, loop in (("regression", train_loop), ("tokens", _token_train_loop)):
        report = audit_training_loop(loop, K, num_batches=N, problem=problem)
        assert report.matches_reference and report.log_checked, str(report)


def _token_train_loop(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    from widgets.core.loops import train_loop
    from widgets.core.accumulation import real_tokens

    return train_loop(model, optimizer, loss_fn, batches, accumulation_steps, scheduler, items=real_tokens)


def test_rescaling_grad_instead_of_the_loss_gets_a_note():
    report = audit_training_loop(rescales_grad, 4)
    assert any("rescales .grad instead of the loss" in note for note in report.notes)


def test_the_logs_of_right_loops_are_checked_and_right():
    assert audit_training_loop(streams_by_groups, 4).log_checked
    assert audit_training_loop(token_window, 4, problem="tokens").log_checked


def test_the_report_says_what_a_token_micro_batch_holds():
    assert "micro-batches of 3 sequences" in str(audit_training_loop(token_window, 4, problem="tokens"))
