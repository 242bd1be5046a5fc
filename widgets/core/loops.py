"""`train`, the accumulation loop a learner copies (each micro-batch's mean loss weighted by its share n_i / n
of its window); each classic mistake as `train` with its changed lines marked `# BUG`; `train_amp`, a variant
with a GradScaler; `train_loop`, the same loop for items other than examples, a global count and AMP."""
from __future__ import annotations

import torch

VARIANTS = ("train_amp",)  # correct loops for a setting `train` does not cover, each a diff of `train`


def train(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None, max_norm=1.0):
    """One update per K micro-batches (a short last window too); returns each update's mean loss."""
    batches, K, logged = list(batches), accumulation_steps, []
    for micro_step, (inputs, targets) in enumerate(batches):
        if micro_step % K == 0:  # a window opens: count its examples (the last may hold fewer)
            n = sum(len(t) for _, t in batches[micro_step : micro_step + K])
            update_loss = 0.0
        loss = loss_fn(model(inputs), targets)  # the mean over this micro-batch's examples
        share = len(targets) / n  # n_i / n: 1/K when the K micro-batches are equal
        (loss * share).backward()  # backward adds into .grad: a sum of means, scaled to one mean
        update_loss += loss.detach() * share  # the update's mean loss, added up on the device
        if (micro_step + 1) % K == 0 or micro_step == len(batches) - 1:  # the window ends
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
    batches, K, logged = list(batches), accumulation_steps, []
    for micro_step, (inputs, targets) in enumerate(batches):
        if micro_step % K == 0:  # a window opens: count its examples (the last may hold fewer)
            n = sum(len(t) for _, t in batches[micro_step : micro_step + K])
            update_loss = 0.0
        loss = loss_fn(model(inputs), targets)  # the mean over this micro-batch's examples
        share = len(targets) / n  # n_i / n: 1/K when the K micro-batches are equal
        loss.backward()  # BUG: K means added up, never divided: K x the update's gradient
        update_loss += loss.detach() * share  # the update's mean loss, added up on the device
        if (micro_step + 1) % K == 0 or micro_step == len(batches) - 1:  # the window ends
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
    batches, K, logged = list(batches), accumulation_steps, []
    for micro_step, (inputs, targets) in enumerate(batches):
        if micro_step % K == 0:  # a window opens: count its examples (the last may hold fewer)
            n = sum(len(t) for _, t in batches[micro_step : micro_step + K])
            update_loss = 0.0
        optimizer.zero_grad(set_to_none=True)  # BUG: empties the pile before it is complete
        loss = loss_fn(model(inputs), targets)  # the mean over this micro-batch's examples
        share = len(targets) / n  # n_i / n: 1/K when the K micro-batches are equal
        (loss * share).backward()  # backward adds into .grad: a sum of means, scaled to one mean
        update_loss += loss.detach() * share  # the update's mean loss, added up on the device
        if (micro_step + 1) % K == 0 or micro_step == len(batches) - 1:  # the window ends
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
    batches, K, logged = list(batches), accumulation_steps, []
    for micro_step, (inputs, targets) in enumerate(batches):
        if micro_step % K == 0:  # a window opens: count its examples (the last may hold fewer)
            n = sum(len(t) for _, t in batches[micro_step : micro_step + K])
            update_loss = 0.0
        loss = loss_fn(model(inputs), targets)  # the mean over this micro-batch's examples
        share = len(targets) / n  # n_i / n: 1/K when the K micro-batches are equal
        (loss * share).backward()  # backward adds into .grad: a sum of means, scaled to one mean
        optimizer.step()  # BUG: outside the if: a step on every half-built pile
        update_loss += loss.detach() * share  # the update's mean loss, added up on the device
        if (micro_step + 1) % K == 0 or micro_step == len(batches) - 1:  # the window ends
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
    batches, K, logged = list(batches), accumulation_steps, []
    for micro_step, (inputs, targets) in enumerate(batches):
        if micro_step % K == 0:  # a window opens: count its examples (the last may hold fewer)
            n = sum(len(t) for _, t in batches[micro_step : micro_step + K])
            update_loss = 0.0
        loss = loss_fn(model(inputs), targets)  # the mean over this micro-batch's examples
        share = len(targets) / n  # n_i / n: 1/K when the K micro-batches are equal
        (loss * share * share).backward()  # BUG: divided twice: K x too small
        update_loss += loss.detach() * share  # the update's mean loss, added up on the device
        if (micro_step + 1) % K == 0 or micro_step == len(batches) - 1:  # the window ends
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
    batches, K, logged = list(batches), accumulation_steps, []
    for micro_step, (inputs, targets) in enumerate(batches):
        if micro_step % K == 0:  # a window opens: count its examples (the last may hold fewer)
            n = sum(len(t) for _, t in batches[micro_step : micro_step + K])
            update_loss = 0.0
        loss = loss_fn(model(inputs), targets)  # the mean over this micro-batch's examples
        share = len(targets) / n  # n_i / n: 1/K when the K micro-batches are equal
        (loss * share).backward()  # backward adds into .grad: a sum of means, scaled to one mean
        update_loss += loss.detach() * share  # the update's mean loss, added up on the device
        if (micro_step + 1) % K == 0:  # BUG: a short last window never ends
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
    batches, K, logged = list(batches), accumulation_steps, []
    for micro_step, (inputs, targets) in enumerate(batches):
        if micro_step % K == 0:  # a window opens: count its examples (the last may hold fewer)
            n = sum(len(t) for _, t in batches[micro_step : micro_step + K])
            update_loss = 0.0
        loss = loss_fn(model(inputs), targets)  # the mean over this micro-batch's examples
        share = len(targets) / n  # n_i / n: 1/K when the K micro-batches are equal
        (loss / K).backward()  # BUG: 1/K is a micro-batch's share only in a full window
        update_loss += loss.detach() * share  # the update's mean loss, added up on the device
        if (micro_step + 1) % K == 0 or micro_step == len(batches) - 1:  # the window ends
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
    batches, K, logged = list(batches), accumulation_steps, []
    for micro_step, (inputs, targets) in enumerate(batches):
        if micro_step % K == 0:  # a window opens: count its examples (the last may hold fewer)
            n = sum(len(t) for _, t in batches[micro_step : micro_step + K])
            update_loss = 0.0
        loss = loss_fn(model(inputs), targets)  # the mean over this micro-batch's examples
        share = len(targets) / n  # n_i / n: 1/K when the K micro-batches are equal
        (loss * share).backward()  # backward adds into .grad: a sum of means, scaled to one mean
        update_loss += loss.detach() * share  # the update's mean loss, added up on the device
        if (micro_step + 1) % K == 0 or micro_step == len(batches) - 1:  # the window ends
            if max_norm is not None:  # clip once, the whole pile
                torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
            optimizer.step()
            if scheduler is not None:
                scheduler.step()  # the schedule counts updates, not micro-steps
            optimizer.zero_grad(set_to_none=True)
            logged.append(float(update_loss) / K)  # BUG: the mean divided again: K x too small
    return logged


def clip_every_micro_step(
        model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None, max_norm=1.0):
    """Clipping runs after every backward(): it shrinks half-built piles, re-weighting them."""
    batches, K, logged = list(batches), accumulation_steps, []
    for micro_step, (inputs, targets) in enumerate(batches):
        if micro_step % K == 0:  # a window opens: count its examples (the last may hold fewer)
            n = sum(len(t) for _, t in batches[micro_step : micro_step + K])
            update_loss = 0.0
        loss = loss_fn(model(inputs), targets)  # the mean over this micro-batch's examples
        share = len(targets) / n  # n_i / n: 1/K when the K micro-batches are equal
        (loss * share).backward()  # backward adds into .grad: a sum of means, scaled to one mean
        if max_norm is not None:  # BUG: outside the if: clips every half-built pile
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
        update_loss += loss.detach() * share  # the update's mean loss, added up on the device
        if (micro_step + 1) % K == 0 or micro_step == len(batches) - 1:  # the window ends
            optimizer.step()
            if scheduler is not None:
                scheduler.step()  # the schedule counts updates, not micro-steps
            optimizer.zero_grad(set_to_none=True)
            logged.append(float(update_loss))  # one .item() per update
    return logged


def scheduler_every_micro_step(
        model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None, max_norm=1.0):
    """scheduler.step() runs every micro-step: a warmup of W updates ends after W/K."""
    batches, K, logged = list(batches), accumulation_steps, []
    for micro_step, (inputs, targets) in enumerate(batches):
        if micro_step % K == 0:  # a window opens: count its examples (the last may hold fewer)
            n = sum(len(t) for _, t in batches[micro_step : micro_step + K])
            update_loss = 0.0
        loss = loss_fn(model(inputs), targets)  # the mean over this micro-batch's examples
        share = len(targets) / n  # n_i / n: 1/K when the K micro-batches are equal
        (loss * share).backward()  # backward adds into .grad: a sum of means, scaled to one mean
        update_loss += loss.detach() * share  # the update's mean loss, added up on the device
        if (micro_step + 1) % K == 0 or micro_step == len(batches) - 1:  # the window ends
            if max_norm is not None:  # clip once, the whole pile
                torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            logged.append(float(update_loss))  # one .item() per update
        if scheduler is not None:  # BUG: outside the if: the schedule counts micro-steps
            scheduler.step()
    return logged


def train_amp(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None, max_norm=1.0):
    """`train` with a GradScaler (float16 on a GPU; run the forward pass under `torch.autocast`)."""
    batches, K, logged = list(batches), accumulation_steps, []
    scaler = torch.amp.GradScaler("cuda" if torch.cuda.is_available() else "cpu")  # one per run
    for micro_step, (inputs, targets) in enumerate(batches):
        if micro_step % K == 0:  # a window opens: count its examples (the last may hold fewer)
            n = sum(len(t) for _, t in batches[micro_step : micro_step + K])
            update_loss = 0.0
        loss = loss_fn(model(inputs), targets)  # the mean over this micro-batch's examples
        share = len(targets) / n  # n_i / n: 1/K when the K micro-batches are equal
        scaler.scale(loss * share).backward()  # scaled up, so small float16 gradients do not vanish
        update_loss += loss.detach() * share  # the update's mean loss, added up on the device
        if (micro_step + 1) % K == 0 or micro_step == len(batches) - 1:  # the window ends
            scaler.unscale_(optimizer)  # once per update, so the clip sees the true gradient
            if max_norm is not None:  # clip once, the whole pile
                torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
            scaler.step(optimizer)  # skips the step if the pile holds an inf or a nan
            scaler.update()  # the scale changes between updates, never inside a pile
            if scheduler is not None:
                scheduler.step()  # the schedule counts updates, not micro-steps
            optimizer.zero_grad(set_to_none=True)
            logged.append(float(update_loss))  # one .item() per update
    return logged


def train_loop(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None, *,
               max_grad_norm: float | None = None, scaler=None,
               items=len, window_items=None) -> list[float]:
    """`train` for any mean loss: `items` counts what one loss averages over (examples: `len`, real tokens),
    `window_items` what the whole window is normalised by (a global count across ranks); `scaler` is AMP's."""
    batches, K, logged = list(batches), accumulation_steps, []
    for micro_step, (inputs, targets) in enumerate(batches):
        if micro_step % K == 0:  # a window opens: count what it averages over (fewer in a short tail)
            window = batches[micro_step : micro_step + K]
            n = window_items(window) if window_items else sum(items(t) for _, t in window)
            update_loss = 0.0
        loss = loss_fn(model(inputs), targets)  # the mean over this micro-batch's items
        share = items(targets) / n  # n_i / n: 1/K for K equal micro-batches, exact for a short tail
        scaled = loss * share if scaler is None else scaler.scale(loss * share)  # AMP: scaled so fp16 keeps it
        scaled.backward()  # backward adds into .grad: this is the accumulation
        update_loss = update_loss + loss.detach() * share  # added up on the device: no host sync per micro-step
        if (micro_step + 1) % K == 0 or micro_step == len(batches) - 1:  # the window ends
            if scaler is not None:
                scaler.unscale_(optimizer)  # clip the true gradient, not the scaled one
            if max_grad_norm is not None:
                torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)  # once, the completed pile
            if scaler is not None:
                scaler.step(optimizer)  # skips the step if the pile holds inf or nan
                scaler.update()  # once per update: the scale follows updates, not micro-steps
            else:
                optimizer.step()  # one update from the whole pile
            if scheduler is not None:
                scheduler.step()  # the schedule counts updates
            optimizer.zero_grad(set_to_none=True)  # empty the pile for the next window
            logged.append(float(update_loss))  # one .item() (one sync) per update
    return logged
