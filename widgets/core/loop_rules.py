"""The seam of the accumulation loop: the decisions a bug can change, and nothing else.

`widgets.core.training._train_accumulated` is the correct loop on one screen. Whatever it delegates
(the loss scale, the update boundary, what happens before the forward and after the backward, the
clip, what is logged) is a field of `LoopRules`, whose defaults are the correct choices. Each bug in
`widgets.core.config.BUGS` swaps one or two of them (`BUG_RULES`), so the loop holds no bug branches
and a bug reads as the one line it changes.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass, replace
from typing import Callable

import torch

from widgets.core.accumulation import flat_grad, is_update_step, micro_batch_weight
from widgets.core.config import check_bugs

@dataclass(frozen=True)
class Training:
    """What one run trains with: the model, its optimizer and warmup, and the clipping threshold."""

    model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LRScheduler
    max_norm: float | None  # None: no clipping


def share_of_update(group_micro_batches: int, accumulation_steps: int) -> float:
    """The correct loss scale: each of the update's equal micro-batches weighs 1/(their number),
    so the pile ends as the gradient of the update's mean loss (1/K for a full group)."""
    return micro_batch_weight(1, group_micro_batches)


def clip_completed_pile(training: Training) -> float:
    """The correct clip: once per update, on the completed pile (if the run clips at all);
    returns the norm before clipping."""
    if training.max_norm is None:
        return float(flat_grad(training.model).norm())
    return float(torch.nn.utils.clip_grad_norm_(training.model.parameters(), training.max_norm))


def _nothing(*args) -> None:
    """The correct thing to do to a pile that is still being built: nothing."""


@dataclass(frozen=True)
class LoopRules:
    """The decisions the accumulation loop delegates; the defaults are the correct loop.

    Each bug in `widgets.core.config.BUGS` replaces one or two of these (see `loop_rules`), so the
    loop in `_train_accumulated` holds no bug branches.
    """

    loss_scale: Callable[[int, int], float] = share_of_update  # (micro-batches in this update, K) -> factor
    is_update_step: Callable[..., bool] = is_update_step  # (micro_step, K, total micro-steps) -> ends an update?
    before_forward: Callable[[Training], None] = _nothing  # the pile must keep what it holds
    after_backward: Callable[[Training, bool], None] = _nothing  # (training, ends_update): leave the pile alone
    clip: Callable[[Training], float] = clip_completed_pile  # once per update; the norm before clipping
    logged_loss: Callable[[float, float], float] = lambda mean_loss, scale: mean_loss  # log the undivided mean


def _also_after_backward(rules: LoopRules, action: Callable[[Training, bool], None]) -> LoopRules:
    """`rules` with `action` run after every backward too, after what already runs there."""
    before = rules.after_backward
    return replace(rules, after_backward=lambda training, ends_update: (before(training, ends_update), action(training, ends_update)))


def _clip_half_built_pile(training: Training, ends_update: bool) -> None:
    torch.nn.utils.clip_grad_norm_(training.model.parameters(), training.max_norm)  # BUG: clips the pile before it is complete


def _step_half_built_pile(training: Training, ends_update: bool) -> None:
    if not ends_update:  # the update's own step follows: K steps per update in all
        training.optimizer.step()  # BUG: updates on a half-built pile


def _schedule_every_micro_step(training: Training, ends_update: bool) -> None:
    if not ends_update:  # the update's own scheduler.step() follows: K per update in all
        with warnings.catch_warnings():  # torch rightly warns that this steps before the first
            warnings.simplefilter("ignore", UserWarning)  # optimizer step: that is the bug
            training.scheduler.step()  # BUG: the warmup advances K times per update


def _measure_only(training: Training) -> float:
    """The update's clip when the bug has already clipped every micro-step: only the norm is read."""
    return float(flat_grad(training.model).norm())


# What each bug changes in the correct rules, applied in this order (so that bugs combine).
BUG_RULES: dict[str, Callable[[LoopRules], LoopRules]] = {
    "tail_divided_by_k": lambda r: replace(r, loss_scale=lambda n, K: 1 / K),  # right for full groups only
    "loss_not_divided": lambda r: replace(r, loss_scale=lambda n, K: 1.0),  # K means add up to K x the mean
    "loss_divided_twice": lambda r: replace(r, loss_scale=lambda n, K, share=r.loss_scale: share(n, K) * share(n, K)),
    # the boundary test without the run's length: the uneven last group never ends an update
    "forget_final_step": lambda r: replace(r, is_update_step=lambda i, K, total: is_update_step(i, K)),
    "zero_grad_every_micro_step": lambda r: replace(
        r, before_forward=lambda training: training.optimizer.zero_grad(set_to_none=True)),  # BUG: empties the pile every time
    "clip_every_micro_step": lambda r: replace(_also_after_backward(r, _clip_half_built_pile), clip=_measure_only),
    "step_every_micro_step": lambda r: _also_after_backward(r, _step_half_built_pile),
    "scheduler_every_micro_step": lambda r: _also_after_backward(r, _schedule_every_micro_step),
    "log_divided_loss": lambda r: replace(r, logged_loss=lambda mean_loss, scale: mean_loss * scale),
}


def loop_rules(bugs: frozenset[str] = frozenset()) -> LoopRules:
    """The correct loop's rules with each bug in `bugs` swapped in."""
    bugs = check_bugs(bugs)
    rules = LoopRules()
    for name, break_rule in BUG_RULES.items():
        if name in bugs:
            rules = break_rule(rules)
    return rules
