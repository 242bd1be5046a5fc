"""`train`, the accumulation loop a learner copies (windows of K micro-batches read from a stream, each
micro-batch's mean loss weighted by its share n_i / n of its window); each classic mistake as `train` with its
changed lines marked `# BUG`; `train_amp`, the recipe for a real GPU job (autocast, GradScaler, DDP's no_sync);
`train_loop`, the same loop for items other than examples and a global count."""
from __future__ import annotations

import contextlib
import itertools

import torch

VARIANTS = ("train_amp",)  # correct loops for a setting `train` does not cover, each a diff of `train`


def train(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None, max_norm=1.0):
    """One update per K micro-batches (a short last window too); returns each update's mean loss."""
    batches, logged = iter(batches), []  # a stream: one window of micro-batches is held at a time
    while window := list(itertools.islice(batches, accumulation_steps)):  # K, fewer at the end
        n = sum(len(targets) for _, targets in window)  # the window's examples: fewer in a tail
        update_loss = 0.0
        for micro_step, (inputs, targets) in enumerate(window):
            loss = loss_fn(model(inputs), targets)  # the mean over this micro-batch's examples
            share = len(targets) / n  # n_i / n: 1/K when the K micro-batches are equal
            (loss * share).backward()  # backward adds into .grad: a sum of means, scaled to a mean
            update_loss += loss.detach() * share  # the update's mean loss, added up on the device
            if micro_step == len(window) - 1:  # the window ends
                if max_norm is not None:  # clip once, the whole pile
                    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
                optimizer.step()
                if scheduler is not None:
                    scheduler.step()  # the schedule counts updates, not micro-steps
                optimizer.zero_grad(set_to_none=True)
                logged.append(float(update_loss))  # one .item() per update
    return logged


def loss_not_divided(
        model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None, max_norm=1.0):
    """The loss reaches backward() undivided: K micro-batch means add up to K x the update's."""
    batches, logged = iter(batches), []  # a stream: one window of micro-batches is held at a time
    while window := list(itertools.islice(batches, accumulation_steps)):  # K, fewer at the end
        n = sum(len(targets) for _, targets in window)  # the window's examples: fewer in a tail
        update_loss = 0.0
        for micro_step, (inputs, targets) in enumerate(window):
            loss = loss_fn(model(inputs), targets)  # the mean over this micro-batch's examples
            share = len(targets) / n  # n_i / n: 1/K when the K micro-batches are equal
            loss.backward()  # BUG: K means added up, never divided: K x the update's gradient
            update_loss += loss.detach() * share  # the update's mean loss, added up on the device
            if micro_step == len(window) - 1:  # the window ends
                if max_norm is not None:  # clip once, the whole pile
                    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
                optimizer.step()
                if scheduler is not None:
                    scheduler.step()  # the schedule counts updates, not micro-steps
                optimizer.zero_grad(set_to_none=True)
                logged.append(float(update_loss))  # one .item() per update
    return logged


def zero_grad_every_micro_step(
        model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None, max_norm=1.0):
    """zero_grad() runs every micro-step: the pile keeps only the last micro-batch."""
    batches, logged = iter(batches), []  # a stream: one window of micro-batches is held at a time
    while window := list(itertools.islice(batches, accumulation_steps)):  # K, fewer at the end
        n = sum(len(targets) for _, targets in window)  # the window's examples: fewer in a tail
        update_loss = 0.0
        for micro_step, (inputs, targets) in enumerate(window):
            optimizer.zero_grad(set_to_none=True)  # BUG: empties the pile before it is complete
            loss = loss_fn(model(inputs), targets)  # the mean over this micro-batch's examples
            share = len(targets) / n  # n_i / n: 1/K when the K micro-batches are equal
            (loss * share).backward()  # backward adds into .grad: a sum of means, scaled to a mean
            update_loss += loss.detach() * share  # the update's mean loss, added up on the device
            if micro_step == len(window) - 1:  # the window ends
                if max_norm is not None:  # clip once, the whole pile
                    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
                optimizer.step()
                if scheduler is not None:
                    scheduler.step()  # the schedule counts updates, not micro-steps
                optimizer.zero_grad(set_to_none=True)
                logged.append(float(update_loss))  # one .item() per update
    return logged


def step_every_micro_step(
        model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None, max_norm=1.0):
    """optimizer.step() runs every micro-step, on a half-built pile: K steps per update."""
    batches, logged = iter(batches), []  # a stream: one window of micro-batches is held at a time
    while window := list(itertools.islice(batches, accumulation_steps)):  # K, fewer at the end
        n = sum(len(targets) for _, targets in window)  # the window's examples: fewer in a tail
        update_loss = 0.0
        for micro_step, (inputs, targets) in enumerate(window):
            loss = loss_fn(model(inputs), targets)  # the mean over this micro-batch's examples
            share = len(targets) / n  # n_i / n: 1/K when the K micro-batches are equal
            (loss * share).backward()  # backward adds into .grad: a sum of means, scaled to a mean
            optimizer.step()  # BUG: outside the if: a step on every half-built pile
            update_loss += loss.detach() * share  # the update's mean loss, added up on the device
            if micro_step == len(window) - 1:  # the window ends
                if max_norm is not None:  # clip once, the whole pile
                    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
                if scheduler is not None:
                    scheduler.step()  # the schedule counts updates, not micro-steps
                optimizer.zero_grad(set_to_none=True)
                logged.append(float(update_loss))  # one .item() per update
    return logged


def loss_divided_twice(
        model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None, max_norm=1.0):
    """The share is applied twice: 1/K^2 for K equal micro-batches, K x too small."""
    batches, logged = iter(batches), []  # a stream: one window of micro-batches is held at a time
    while window := list(itertools.islice(batches, accumulation_steps)):  # K, fewer at the end
        n = sum(len(targets) for _, targets in window)  # the window's examples: fewer in a tail
        update_loss = 0.0
        for micro_step, (inputs, targets) in enumerate(window):
            loss = loss_fn(model(inputs), targets)  # the mean over this micro-batch's examples
            share = len(targets) / n  # n_i / n: 1/K when the K micro-batches are equal
            (loss * share * share).backward()  # BUG: divided twice: K x too small
            update_loss += loss.detach() * share  # the update's mean loss, added up on the device
            if micro_step == len(window) - 1:  # the window ends
                if max_norm is not None:  # clip once, the whole pile
                    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
                optimizer.step()
                if scheduler is not None:
                    scheduler.step()  # the schedule counts updates, not micro-steps
                optimizer.zero_grad(set_to_none=True)
                logged.append(float(update_loss))  # one .item() per update
    return logged


def forget_final_step(
        model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None, max_norm=1.0):
    """The boundary counts full windows only: a short last window never gets its step."""
    batches, logged = iter(batches), []  # a stream: one window of micro-batches is held at a time
    while window := list(itertools.islice(batches, accumulation_steps)):  # K, fewer at the end
        n = sum(len(targets) for _, targets in window)  # the window's examples: fewer in a tail
        update_loss = 0.0
        for micro_step, (inputs, targets) in enumerate(window):
            loss = loss_fn(model(inputs), targets)  # the mean over this micro-batch's examples
            share = len(targets) / n  # n_i / n: 1/K when the K micro-batches are equal
            (loss * share).backward()  # backward adds into .grad: a sum of means, scaled to a mean
            update_loss += loss.detach() * share  # the update's mean loss, added up on the device
            if micro_step == accumulation_steps - 1:  # BUG: a short last window never ends
                if max_norm is not None:  # clip once, the whole pile
                    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
                optimizer.step()
                if scheduler is not None:
                    scheduler.step()  # the schedule counts updates, not micro-steps
                optimizer.zero_grad(set_to_none=True)
                logged.append(float(update_loss))  # one .item() per update
    return logged


def tail_divided_by_k(
        model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None, max_norm=1.0):
    """Each loss is divided by K: right for K equal micro-batches, too small in a short window."""
    batches, logged = iter(batches), []  # a stream: one window of micro-batches is held at a time
    while window := list(itertools.islice(batches, accumulation_steps)):  # K, fewer at the end
        n = sum(len(targets) for _, targets in window)  # the window's examples: fewer in a tail
        update_loss = 0.0
        for micro_step, (inputs, targets) in enumerate(window):
            loss = loss_fn(model(inputs), targets)  # the mean over this micro-batch's examples
            share = len(targets) / n  # n_i / n: 1/K when the K micro-batches are equal
            (loss / accumulation_steps).backward()  # BUG: 1/K is a share only in a full window
            update_loss += loss.detach() * share  # the update's mean loss, added up on the device
            if micro_step == len(window) - 1:  # the window ends
                if max_norm is not None:  # clip once, the whole pile
                    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
                optimizer.step()
                if scheduler is not None:
                    scheduler.step()  # the schedule counts updates, not micro-steps
                optimizer.zero_grad(set_to_none=True)
                logged.append(float(update_loss))  # one .item() per update
    return logged


def log_divided_loss(
        model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None, max_norm=1.0):
    """The logged loss is divided by K once more: the log is K x too small, training is right."""
    batches, logged = iter(batches), []  # a stream: one window of micro-batches is held at a time
    while window := list(itertools.islice(batches, accumulation_steps)):  # K, fewer at the end
        n = sum(len(targets) for _, targets in window)  # the window's examples: fewer in a tail
        update_loss = 0.0
        for micro_step, (inputs, targets) in enumerate(window):
            loss = loss_fn(model(inputs), targets)  # the mean over this micro-batch's examples
            share = len(targets) / n  # n_i / n: 1/K when the K micro-batches are equal
            (loss * share).backward()  # backward adds into .grad: a sum of means, scaled to a mean
            update_loss += loss.detach() * share  # the update's mean loss, added up on the device
            if micro_step == len(window) - 1:  # the window ends
                if max_norm is not None:  # clip once, the whole pile
                    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
                optimizer.step()
                if scheduler is not None:
                    scheduler.step()  # the schedule counts updates, not micro-steps
                optimizer.zero_grad(set_to_none=True)
                logged.append(float(update_loss) / accumulation_steps)  # BUG: K x too small
    return logged


def clip_every_micro_step(
        model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None, max_norm=1.0):
    """Clipping runs after every backward(): it shrinks half-built piles, re-weighting them."""
    batches, logged = iter(batches), []  # a stream: one window of micro-batches is held at a time
    while window := list(itertools.islice(batches, accumulation_steps)):  # K, fewer at the end
        n = sum(len(targets) for _, targets in window)  # the window's examples: fewer in a tail
        update_loss = 0.0
        for micro_step, (inputs, targets) in enumerate(window):
            loss = loss_fn(model(inputs), targets)  # the mean over this micro-batch's examples
            share = len(targets) / n  # n_i / n: 1/K when the K micro-batches are equal
            (loss * share).backward()  # backward adds into .grad: a sum of means, scaled to a mean
            if max_norm is not None:  # BUG: outside the if: clips every half-built pile
                torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
            update_loss += loss.detach() * share  # the update's mean loss, added up on the device
            if micro_step == len(window) - 1:  # the window ends
                optimizer.step()
                if scheduler is not None:
                    scheduler.step()  # the schedule counts updates, not micro-steps
                optimizer.zero_grad(set_to_none=True)
                logged.append(float(update_loss))  # one .item() per update
    return logged


def scheduler_every_micro_step(
        model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None, max_norm=1.0):
    """scheduler.step() runs every micro-step: a warmup of W updates ends after W/K."""
    batches, logged = iter(batches), []  # a stream: one window of micro-batches is held at a time
    while window := list(itertools.islice(batches, accumulation_steps)):  # K, fewer at the end
        n = sum(len(targets) for _, targets in window)  # the window's examples: fewer in a tail
        update_loss = 0.0
        for micro_step, (inputs, targets) in enumerate(window):
            loss = loss_fn(model(inputs), targets)  # the mean over this micro-batch's examples
            share = len(targets) / n  # n_i / n: 1/K when the K micro-batches are equal
            (loss * share).backward()  # backward adds into .grad: a sum of means, scaled to a mean
            update_loss += loss.detach() * share  # the update's mean loss, added up on the device
            if micro_step == len(window) - 1:  # the window ends
                if max_norm is not None:  # clip once, the whole pile
                    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
                logged.append(float(update_loss))  # one .item() per update
            if scheduler is not None:  # BUG: outside the if: the schedule counts micro-steps
                scheduler.step()
    return logged


def train_amp(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None, max_norm=1.0):
    """`train` for a GPU job: autocast and a GradScaler on CUDA, one DDP all-reduce per window."""
    batches, logged = iter(batches), []  # a stream: one window of micro-batches is held at a time
    device = next(model.parameters()).device.type
    use_amp = device == "cuda"  # float16 where it applies; off, autocast and scaler do nothing
    scaler = torch.amp.GradScaler(device, enabled=use_amp)  # one per run: its scale carries over
    while window := list(itertools.islice(batches, accumulation_steps)):  # K, fewer at the end
        n = sum(len(targets) for _, targets in window)  # the window's examples: fewer in a tail
        update_loss = 0.0
        for micro_step, (inputs, targets) in enumerate(window):
            last = micro_step == len(window) - 1  # DDP all-reduces the pile on this backward only
            skip_sync = hasattr(model, "no_sync") and not last  # DDP's model.no_sync(); else no-op
            with model.no_sync() if skip_sync else contextlib.nullcontext():
                with torch.autocast(device, dtype=torch.float16, enabled=use_amp):  # forward+loss
                    loss = loss_fn(model(inputs), targets)  # this micro-batch's mean loss
                share = len(targets) / n  # n_i / n; a token-mean loss counts tokens: developer_4
                scaler.scale(loss * share).backward()  # scaled up so small float16 grads survive
            update_loss += loss.detach().float() * share  # the update's mean loss, in float32
            if last:  # the window ends
                scaler.unscale_(optimizer)  # once, so the clip and the step see the true gradient
                if max_norm is not None:  # clip once, the whole pile
                    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
                scale = scaler.get_scale()
                scaler.step(optimizer)  # skips the step if the pile holds an inf or a nan ...
                scaler.update()  # ... and then lowers the scale: that is how a skip shows
                if scheduler is not None and scaler.get_scale() >= scale:  # pytorch/pytorch#55585
                    scheduler.step()  # the schedule counts updates the optimizer really made
                optimizer.zero_grad(set_to_none=True)
                logged.append(float(update_loss))  # one .item() per update
    return logged


def train_loop(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None, *,
               max_grad_norm: float | None = None, items=len, window_items=None) -> list[float]:
    """`train` for any mean loss: `items` counts what one loss averages over (examples: `len`, real
    tokens), `window_items` what the whole window is normalised by (a global count across ranks)."""
    batches, logged = iter(batches), []  # a stream: one window of micro-batches is held at a time
    while window := list(itertools.islice(batches, accumulation_steps)):  # K, fewer at the end
        # what the window averages over (fewer in a short tail), counted before its first backward
        n = window_items(window) if window_items else sum(items(t) for _, t in window)
        update_loss = 0.0
        for micro_step, (inputs, targets) in enumerate(window):
            loss = loss_fn(model(inputs), targets)  # the mean over this micro-batch's items
            share = items(targets) / n  # n_i / n: 1/K for K equal micro-batches, exact for a tail
            (loss * share).backward()  # backward adds into .grad: this is the accumulation
            update_loss = update_loss + loss.detach() * share  # on the device: no sync per step
            if micro_step == len(window) - 1:  # the window ends
                if max_grad_norm is not None:
                    torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)  # once
                optimizer.step()  # one update from the whole pile
                if scheduler is not None:
                    scheduler.step()  # the schedule counts updates
                optimizer.zero_grad(set_to_none=True)  # empty the pile for the next window
                logged.append(float(update_loss))  # one .item() (one sync) per update
    return logged
