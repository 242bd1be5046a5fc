"""Things that must happen once per update, not once per micro-step: weight EMA, hand-written
weight decay, gradient clipping, and how clipping can hide a missing division.

Each run trains the core regression model with plain SGD (written out) for a few updates of K micro-batches and
returns its final weights (and EMA weights); the reference does every once-per-update operation
once, after the K-th micro-batch. The boundary is the same named predicate the loop uses.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from widgets.core.accumulation import GRAD_ATOL, GRAD_RTOL, flat_grad, is_update_step, make_model, make_regression_data
from widgets.core.config import FLOAT32, check_memory, check_time
from widgets.core.config import check_float, check_int

# High estimates for the budget checks: a micro-step of the 1 -> 16 -> 1 model costs ~0.4 ms on an
# idle CPU thread (measured; take 2 ms for a busy shared one), plus a little per example.
MICRO_STEP_S, EXAMPLE_S = 2e-3, 2e-6

# the mistakes of widgets.core.mistakes.EVERY_MISTAKE this run can make
MISTAKES = ("ema_every_micro_step", "decay_every_micro_step", "loss_not_divided")


@dataclass(frozen=True)
class OncePerUpdateRun:
    """Final flat weights (P,), final flat EMA weights (P,), and each update's gradient norm before clipping."""

    weights: torch.Tensor
    ema: torch.Tensor
    grad_norms: tuple[float, ...]


def run_once_per_update(accumulation_steps: int = 4, micro_batch_size: int = 8, num_updates: int = 5, *,
                        learning_rate: float = 0.1, ema_decay: float = 0.9, weight_decay: float = 0.0,
                        max_grad_norm: float | None = None, mistakes: tuple[str, ...] = (),
                        seed: int = 0) -> OncePerUpdateRun:
    """Train with K micro-batches per update; `mistakes` (of MISTAKES) move a step to the wrong place."""
    K = check_int("accumulation_steps", accumulation_steps, 1, 1024)
    b = check_int("micro_batch_size", micro_batch_size, 1, 1024)
    U = check_int("num_updates", num_updates, 1, 1000)
    check_float("learning_rate", learning_rate, 0.0, 10.0)
    check_float("ema_decay", ema_decay, 0.0, 1.0, low_inclusive=True)
    check_float("weight_decay", weight_decay, 0.0, 1.0, low_inclusive=True)
    if max_grad_norm is not None:
        check_float("max_grad_norm", max_grad_norm, 0.0, 1e6)
    unknown = sorted(set(mistakes) - set(MISTAKES))
    if unknown:
        raise ValueError(f"mistakes: unknown name(s) {unknown}; allowed: {list(MISTAKES)}")
    what = f"run_once_per_update(accumulation_steps={K}, micro_batch_size={b}, num_updates={U})"
    # the K b U examples (x, y and the temporaries that make y), then one micro-batch's graph: 20 floats an example
    check_memory(what, K * b * U * 20 * FLOAT32)
    check_time(what, K * U * (MICRO_STEP_S + b * EXAMPLE_S))
    x, y = make_regression_data(K * b * num_updates, seed=seed)
    model = make_model(seed=seed)
    ema = [p.detach().clone() for p in model.parameters()]
    norms = []
    for micro_step in range(K * num_updates):
        part = slice(micro_step * b, (micro_step + 1) * b)
        loss = torch.nn.functional.mse_loss(model(x[part]), y[part])
        (loss if "loss_not_divided" in mistakes else loss / K).backward()
        boundary = is_update_step(micro_step, K)
        if boundary:
            norms.append(float(flat_grad(model).norm()))
            if max_grad_norm is not None:
                torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
            with torch.no_grad():  # plain SGD by hand: torch.optim's first step imports seconds of machinery
                for p in model.parameters():
                    p.add_(p.grad, alpha=-learning_rate)
                    p.grad = None
        with torch.no_grad():
            if boundary or "decay_every_micro_step" in mistakes:
                for p in model.parameters():
                    p.mul_(1 - learning_rate * weight_decay)  # decoupled decay, by hand
            if boundary or "ema_every_micro_step" in mistakes:
                for e, p in zip(ema, model.parameters()):
                    e.mul_(ema_decay).add_(p, alpha=1 - ema_decay)
    flat = lambda tensors: torch.cat([t.detach().reshape(-1) for t in tensors])  # noqa: E731
    return OncePerUpdateRun(flat(model.parameters()), flat(ema), tuple(norms))


def same_run(a: OncePerUpdateRun, b: OncePerUpdateRun) -> dict[str, bool]:
    """allclose (float32 tolerances) of the weights and of the EMA weights of two runs."""
    for name, value in (("a", a), ("b", b)):
        if not isinstance(value, OncePerUpdateRun):
            raise TypeError(f"{name} must be an OncePerUpdateRun, got {type(value).__name__}")
    return {"weights": bool(torch.allclose(a.weights, b.weights, rtol=GRAD_RTOL, atol=GRAD_ATOL)),
            "ema": bool(torch.allclose(a.ema, b.ema, rtol=GRAD_RTOL, atol=GRAD_ATOL))}
