"""Right loops, written in the ways people write them, pass with no finding at all.

A false finding misleads as much as a missed one: every variant below makes each update the
big-batch one, and the auditor must say so (for K = 4 and K = 3, uneven final group included).
"""
import pytest
import torch

from widgets.audit import audit_training_loop
from widgets.audit.problems import IGNORE_INDEX


def plain(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    n, logged, losses = len(batches), [], []
    for i, (x, y) in enumerate(batches):
        group_size = min(accumulation_steps, n - i // accumulation_steps * accumulation_steps)
        loss = loss_fn(model(x), y)
        (loss / group_size).backward()
        losses.append(loss.item())
        if (i + 1) % accumulation_steps == 0 or i + 1 == n:
            optimizer.step()
            if scheduler is not None:
                scheduler.step()
            optimizer.zero_grad()
            logged.append(sum(losses) / len(losses))
            losses = []
    return logged


def zero_grad_at_group_start(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    n = len(batches)
    for i, (x, y) in enumerate(batches):
        if i % accumulation_steps == 0:
            model.zero_grad(set_to_none=False)  # empty the pile before the group, not after the step
        group_size = min(accumulation_steps, n - i // accumulation_steps * accumulation_steps)
        (loss_fn(model(x), y) / group_size).backward()
        if (i + 1) % accumulation_steps == 0 or i + 1 == n:
            optimizer.step()


def rescales_grad(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    n = len(batches)
    for i, (x, y) in enumerate(batches):
        loss_fn(model(x), y).backward()  # undivided: the pile is a sum ...
        if (i + 1) % accumulation_steps == 0 or i + 1 == n:
            for p in model.parameters():
                p.grad /= i % accumulation_steps + 1  # ... divided once, at the boundary, by the group's size
            optimizer.step()
            optimizer.zero_grad()


def clips_once(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    n = len(batches)
    for i, (x, y) in enumerate(batches):
        group_size = min(accumulation_steps, n - i // accumulation_steps * accumulation_steps)
        (loss_fn(model(x), y) / group_size).backward()
        if (i + 1) % accumulation_steps == 0 or i + 1 == n:
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            if scheduler is not None:
                scheduler.step()
            optimizer.zero_grad(set_to_none=True)


def rescales_grad_then_clips(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    n = len(batches)
    for i, (x, y) in enumerate(batches):
        loss_fn(model(x), y).backward()
        if (i + 1) % accumulation_steps == 0 or i + 1 == n:
            model.weight.grad = model.weight.grad / (i % accumulation_steps + 1)  # a new tensor, assigned
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)  # then clipped, once, on the mean
            optimizer.step()
            optimizer.zero_grad()


def streams_by_groups(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    """No len(): collect a group, then run it knowing its size; the last, shorter one too."""
    logged, group = [], []

    def update(group):
        total = 0.0
        for x, y in group:
            loss = loss_fn(model(x), y)
            (loss / len(group)).backward()
            total += loss.item()
        optimizer.step()
        optimizer.zero_grad()
        logged.append(total / len(group))

    for batch in batches:
        group.append(batch)
        if len(group) == accumulation_steps:
            update(group)
            group = []
    if group:
        update(group)
    return logged


def streams_one_ahead(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    """No len(): backward as the batches come, undivided; look one batch ahead to know the last,
    and divide the pile by the number of micro-batches it holds when the update ends."""
    stream, in_group = iter(batches), 0
    current = next(stream, None)
    while current is not None:
        following = next(stream, None)
        x, y = current
        loss_fn(model(x), y).backward()
        in_group += 1
        if in_group == accumulation_steps or following is None:
            for p in model.parameters():
                p.grad /= in_group
            optimizer.step()
            optimizer.zero_grad()
            in_group = 0
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


VARIANTS = [
    (plain, dict(with_scheduler=True)),
    (zero_grad_at_group_start, {}),
    (rescales_grad, {}),
    (clips_once, dict(clip_norm=1.0, with_scheduler=True)),
    (rescales_grad_then_clips, dict(clip_norm=1.0)),
    (streams_by_groups, dict(streaming=True)),
    (streams_one_ahead, dict(streaming=True)),
    (token_window, dict(problem="tokens")),
    (token_window_streamed, dict(problem="tokens", streaming=True)),
    (token_mean_reweighted, dict(problem="tokens")),
]


@pytest.mark.parametrize("loop, options", VARIANTS, ids=[loop.__name__ for loop, _ in VARIANTS])
@pytest.mark.parametrize("K", [4, 3, 1])
def test_a_right_loop_gets_no_finding(loop, options, K):
    report = audit_training_loop(loop, K, **options)
    assert report.mistakes == set(), str(report)
    assert report.update_ratios == pytest.approx([1.0] * len(report.update_ratios))


@pytest.mark.parametrize("num_batches", [8, 9, 1])
def test_with_or_without_an_uneven_final_group(num_batches):
    assert audit_training_loop(streams_by_groups, 4, num_batches=num_batches, streaming=True).matches_reference
    assert audit_training_loop(token_window, 4, num_batches=num_batches, problem="tokens").matches_reference


def test_rescaling_grad_instead_of_the_loss_gets_a_note():
    report = audit_training_loop(rescales_grad, 4)
    assert any("rescales .grad instead of the loss" in note for note in report.notes)


def test_the_logs_of_right_loops_are_checked_and_right():
    assert audit_training_loop(streams_by_groups, 4, streaming=True).log_checked
    assert audit_training_loop(token_window, 4, problem="tokens").log_checked


def test_a_loop_that_asks_a_stream_for_its_length_is_told_why_it_cannot():
    report = audit_training_loop(plain, 4, streaming=True)
    assert report.mistakes == {"loop_raised"}
    assert "stream of unknown length" in report.findings[0] and "len(batches)" in report.findings[0]


def test_the_report_says_the_batches_came_as_a_stream_and_what_a_token_micro_batch_holds():
    assert ", handed as a stream with no len()" in str(audit_training_loop(streams_by_groups, 4, streaming=True))
    assert "micro-batches of 3 sequences" in str(audit_training_loop(token_window, 4, problem="tokens"))
