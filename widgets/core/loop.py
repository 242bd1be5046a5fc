"""The lab's general accumulation loop: `widgets.core.loops.train` with items, a global count and AMP.

`train` (widgets.core.loops) is the twenty-line loop a learner copies, for losses that are a mean
over a micro-batch's examples. `train_loop` is the same loop, line for line where they overlap
(a test holds them bit for bit equal), for what the researcher lessons and the auditor's reference
need besides: `items` says what one loss averages over (examples by default, real tokens for a
language model) and `window_items` what the whole update is normalised by (by default the items of
the window's own micro-batches; pass a global count, e.g. all-reduced across ranks, to normalise by
that); `scaler` is a `torch.amp.GradScaler`. Each micro-batch's *mean* loss weighs n_i / n, so the
pile ends as the gradient of the update's mean loss, a short last window included. The classic
mistakes are not switches in it: each is its own loop in `widgets.core.loops`.
"""
from __future__ import annotations

from typing import Callable

import torch


def count_examples(targets: torch.Tensor) -> int:
    """The items one micro-batch's mean loss averages over, for a per-example loss: its examples."""
    return len(targets)


def train_loop(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None, *,
               max_grad_norm: float | None = None, scaler=None,
               items: Callable[[torch.Tensor], int] = count_examples,
               window_items: Callable[[list], float] | None = None) -> list[float]:
    """Accumulate `accumulation_steps` micro-batches per update; returns each update's mean loss.

    `loss_fn(output, targets)` is the mean over the micro-batch's items; `scaler` an optional
    `torch.amp.GradScaler`; `max_grad_norm` clips once per update (None: no clipping).
    """
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
