"""The lab's one correct accumulation loop, with every classic bug as a visible `if`.

developer_2 shows `train_loop` in a cell (a test asserts the cell is this source); the explorer,
the auditor's reference, the gallery, the equal-time race and the frameworks comparison all run
it. A bug switch never hides behind a rule object: each one is the `if` a reader sees below, and
the explorer's checkbox for bug X runs exactly that line.

`items` says what one loss averages over (examples by default, real tokens for a language model)
and `window_items` what the whole update is normalised by (by default the items of the window's
own micro-batches; pass a global count, e.g. all-reduced across ranks, to normalise by that).
Each micro-batch's *mean* loss then weighs n_i / n, so the pile ends as the gradient of the
update's mean loss, an uneven last window included.
"""
from __future__ import annotations

import inspect
import textwrap
from typing import Callable, Iterable

import torch

from widgets.core.config import check_bugs


def count_examples(targets: torch.Tensor) -> int:
    """The items one micro-batch's mean loss averages over, for a per-example loss: its examples."""
    return len(targets)


def train_loop(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None, *,
               max_grad_norm: float | None = None, scaler=None,
               items: Callable[[torch.Tensor], int] = count_examples,
               window_items: Callable[[list], float] | None = None,
               bugs: Iterable[str] = frozenset()) -> list[float]:
    """Accumulate `accumulation_steps` micro-batches per update; returns each update's mean loss.

    `loss_fn(output, targets)` is the mean over the micro-batch's items; `scaler` an optional
    `torch.amp.GradScaler`; `bugs` the names in `widgets.core.config.BUGS` to switch on.
    """
    batches, K, bugs = list(batches), accumulation_steps, check_bugs(bugs)  # an unknown bug name raises
    logged = []
    for micro_step, (inputs, targets) in enumerate(batches):
        if micro_step % K == 0:  # a window opens: count what it averages over (fewer in a short tail)
            window = batches[micro_step : micro_step + K]
            n = window_items(window) if window_items else sum(items(t) for _, t in window)
            update_loss = 0.0
        if "zero_grad_every_micro_step" in bugs:
            optimizer.zero_grad(set_to_none=True)  # BUG: empties the pile before it is complete
        loss = loss_fn(model(inputs), targets)  # the mean over this micro-batch's items
        weight = items(targets) / n  # n_i / n: 1/K for K equal micro-batches, exact for a short tail
        share = weight
        if "loss_not_divided" in bugs:
            share = 1.0  # BUG: K micro-batch means add up to K x the update's mean
        if "tail_divided_by_k" in bugs:
            share = 1 / K  # BUG: right for a full window only; a tail of m < K weighs m/K of its mean
        if "loss_divided_twice" in bugs:
            share = share * share  # BUG: divided once here and once more where the loss was made
        scaled = loss * share if scaler is None else scaler.scale(loss * share)  # AMP: scaled so fp16 keeps it
        scaled.backward()  # backward adds into .grad: this is the accumulation
        logged_loss = loss.detach() * weight  # this micro-batch's part of the update's mean loss
        if "log_divided_loss" in bugs:
            logged_loss = logged_loss * weight  # BUG: logs the divided loss, K x too small
        update_loss = update_loss + logged_loss  # added up on the device: no host sync per micro-step
        ends_update = (micro_step + 1) % K == 0 or micro_step == len(batches) - 1  # every K-th, and the last
        if "forget_final_step" in bugs:
            ends_update = (micro_step + 1) % K == 0  # BUG: the uneven last window never gets its step
        if "clip_every_micro_step" in bugs and max_grad_norm is not None:
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)  # BUG: clips a half-built pile
        if "step_every_micro_step" in bugs and not ends_update:
            optimizer.step()  # BUG: steps on a half-built pile (the update's own step follows)
        if "scheduler_every_micro_step" in bugs and not ends_update and scheduler is not None:
            scheduler.step()  # BUG: the warmup advances K times per update
        if ends_update:
            if scaler is not None:
                scaler.unscale_(optimizer)  # clip the true gradient, not the scaled one
            if max_grad_norm is not None and "clip_every_micro_step" not in bugs:
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


def bug_lines(name: str) -> str:
    """The lines of `train_loop` that bug `name` switches: each line naming it, with the body of its
    `if`, dedented; separate places are joined by a `...` line. What the explorer runs for that bug."""
    if not isinstance(name, str):
        raise TypeError(f"name must be one bug name (a str), got {type(name).__name__}")
    check_bugs({name})
    lines = inspect.getsource(train_loop).splitlines()
    indent = lambda line: len(line) - len(line.lstrip())  # noqa: E731
    blocks, i = [], 0
    while i < len(lines):
        if f'"{name}"' not in lines[i]:
            i += 1
            continue
        block = [lines[i]]
        if lines[i].rstrip().endswith(":"):  # the body of its `if`
            while i + 1 < len(lines) and indent(lines[i + 1]) > indent(lines[i]):
                i += 1
                block.append(lines[i])
        blocks.append(textwrap.dedent("\n".join(block)))
        i += 1
    return "\n...\n".join(blocks)
