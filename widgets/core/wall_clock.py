"""The three ways of training compared at equal wall-clock time, measured on this machine.

Equal updates flatters accumulation (each of its updates costs K passes); equal examples is fair
in arithmetic; equal time is what a person waiting for a run sees. Each regime trains from the
same weights on the same draws with bare loops (no measurement inside the timed part), and the
clock stops while the loss on all examples is taken after each update. Timings depend on the
machine and its load: callers should present them as measured here, not as facts.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, replace

import torch

from widgets.core.accumulation import make_model, make_regression_data
from widgets.core.config import AccumulationConfig, check_config
from widgets.core.threads import one_thread
from widgets.core.training import OPTIMIZERS, example_order, mse

REGIMES = ("accumulated", "big_batch", "small_batches")


@dataclass(frozen=True)
class TimedRun:
    """One regime: after each of its updates, the seconds spent training so far and the loss on all examples."""

    seconds: list[float]
    loss: list[float]

    def loss_at(self, budget_s: float) -> float:
        """The loss after the last update finished within `budget_s` seconds (the start loss if none)."""
        done = [loss for s, loss in zip(self.seconds, self.loss) if s <= budget_s]
        return done[-1] if done else self.loss[0]


@dataclass(frozen=True)
class WallClockRace:
    """`runs[regime]`; each run's lists start with (0 s, the loss before training)."""

    config: AccumulationConfig
    runs: dict[str, TimedRun]


def race_at_equal_time(config: AccumulationConfig) -> WallClockRace:
    """Train accumulated (K micro-batches of b, one step), big batch (K·b at once, one step) and
    small batches (one step per micro-batch of b) over the same examples, timing only the training."""
    check_config(config)
    config = replace(config, bugs=frozenset())  # the race is about time, not about bugs
    x, y = make_regression_data(config.num_examples, config.seed)
    order, K, b = example_order(config), config.accumulation_steps, config.micro_batch_size
    groups = [order[u * K * b:(u + 1) * K * b] for u in range(config.num_updates)]
    plans = {  # regime -> the list of updates, each a list of micro-batches (index tensors)
        "accumulated": [[g[k * b:(k + 1) * b] for k in range(K)] for g in groups],
        "big_batch": [[g] for g in groups],
        "small_batches": [[g[k * b:(k + 1) * b]] for g in groups for k in range(K)],
    }
    with one_thread():
        return WallClockRace(config, {regime: _timed(config, x, y, plan) for regime, plan in plans.items()})


def _timed(config: AccumulationConfig, x: torch.Tensor, y: torch.Tensor, plan: list) -> TimedRun:
    model = make_model(config.seed)
    optimizer = OPTIMIZERS[config.optimizer](model.parameters(), config.learning_rate)
    with torch.no_grad():
        seconds, losses = [0.0], [mse(model(x), y).item()]
    spent = 0.0
    for update in plan:
        start = time.perf_counter()
        total = sum(len(idx) for idx in update)
        for idx in update:
            (mse(model(x[idx]), y[idx]) * (len(idx) / total)).backward()  # each micro-batch's share
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        spent += time.perf_counter() - start
        with torch.no_grad():  # outside the clock
            seconds.append(spent)
            losses.append(mse(model(x), y).item())
    return TimedRun(seconds, losses)
