"""Things that must happen once per update, not once per micro-step: weight EMA, hand-written weight decay,
gradient clipping, and how clipping can hide a missing division; plain SGD, written out."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from widgets.core.accumulation import GRAD_ATOL, GRAD_RTOL, flat_grad, is_update_step, make_model, make_regression_data
from widgets.core.config import check_float, check_int

# five updates of K micro-batches of 8 examples, SGD at 0.1, the EMA decaying by 0.9 an update
MICRO_BATCH_SIZE, NUM_UPDATES, LEARNING_RATE, EMA_DECAY = 8, 5, 0.1, 0.9

# the mistakes of widgets.core.mistakes.EVERY_MISTAKE this run can make
MISTAKES = ("ema_every_micro_step", "decay_every_micro_step", "loss_not_divided")


@dataclass(frozen=True)
class OncePerUpdateRun:
    """Final flat weights (P,), final flat EMA weights (P,), and each update's gradient norm before clipping."""

    weights: torch.Tensor
    ema: torch.Tensor
    grad_norms: tuple[float, ...]


def run_once_per_update(accumulation_steps: int = 4, *, weight_decay: float = 0.0, max_grad_norm: float | None = None,
                        mistakes: tuple[str, ...] = (), seed: int = 0) -> OncePerUpdateRun:
    """Train with K micro-batches per update; `mistakes` (of MISTAKES) move a step to the wrong place."""
    K = check_int("accumulation_steps", accumulation_steps, 1, 1024)
    b = MICRO_BATCH_SIZE
    check_float("weight_decay", weight_decay, 0.0, 1.0, low_inclusive=True)
    if max_grad_norm is not None:
        check_float("max_grad_norm", max_grad_norm, 0.0, 1e6)
    unknown = sorted(set(mistakes) - set(MISTAKES))
    if unknown:
        raise ValueError(f"mistakes: unknown name(s) {unknown}; allowed: {list(MISTAKES)}")
    x, y = make_regression_data(K * b * NUM_UPDATES, seed=seed)
    model = make_model(seed=seed)
    ema = [p.detach().clone() for p in model.parameters()]
    norms = []
    for micro_step in range(K * NUM_UPDATES):
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
                    p.add_(p.grad, alpha=-LEARNING_RATE)
                    p.grad = None
        with torch.no_grad():
            if boundary or "decay_every_micro_step" in mistakes:
                for p in model.parameters():
                    p.mul_(1 - LEARNING_RATE * weight_decay)  # decoupled decay, by hand
            if boundary or "ema_every_micro_step" in mistakes:
                for e, p in zip(ema, model.parameters()):
                    e.mul_(EMA_DECAY).add_(p, alpha=1 - EMA_DECAY)
    flat = lambda tensors: torch.cat([t.detach().reshape(-1) for t in tensors])  # noqa: E731
    return OncePerUpdateRun(flat(model.parameters()), flat(ema), tuple(norms))


def same_run(a: OncePerUpdateRun, b: OncePerUpdateRun) -> dict[str, bool]:
    """allclose (float32 tolerances) of the weights and of the EMA weights of two runs."""
    for name, value in (("a", a), ("b", b)):
        if not isinstance(value, OncePerUpdateRun):
            raise TypeError(f"{name} must be an OncePerUpdateRun, got {type(value).__name__}")
    return {"weights": bool(torch.allclose(a.weights, b.weights, rtol=GRAD_RTOL, atol=GRAD_ATOL)),
            "ema": bool(torch.allclose(a.ema, b.ema, rtol=GRAD_RTOL, atol=GRAD_ATOL))}
