"""The three ways of training at equal wall-clock time, measured on this machine: what a person waiting sees."""
from __future__ import annotations

import time
from dataclasses import dataclass, replace

import torch

from widgets.core.accumulation import make_model, make_regression_data
from widgets.core.config import AccumulationConfig, check_config
from widgets.core.loops import train
from widgets.core.training import example_order, known_torch_state, make_optimizer, mse
from widgets.core.views import Table


@dataclass(frozen=True)
class TimedRun:
    """One regime: from (0 s, the loss before training), after each update the seconds spent and the loss."""

    seconds: list[float]
    loss: list[float]

    def loss_at(self, budget_s: float) -> float:
        """The loss after the last update finished within `budget_s` seconds (the start loss if none)."""
        done = [loss for s, loss in zip(self.seconds, self.loss) if s <= budget_s]
        return done[-1] if done else self.loss[0]


def race_at_equal_time(config: AccumulationConfig) -> dict[str, TimedRun]:
    """Accumulated, big batch (K·b at once) and small batches (a step per b) over the same examples, each
    with the lab's loop `train`; the clock stops after each update while the loss on all examples is taken."""
    check_config(config)
    config = replace(config, mistake=None)  # the race is about time, not about mistakes
    x, y = make_regression_data(config.num_examples, config.seed)
    K, b = config.accumulation_steps, config.micro_batch_size
    order = example_order(config)[: config.num_updates * K * b]  # the full updates; no tail
    micro = [(x[idx], y[idx]) for idx in order.split(b)]
    big = [(x[idx], y[idx]) for idx in order.split(K * b)]
    plans = {"accumulated": (micro, K), "big_batch": (big, 1), "small_batches": (micro, 1)}
    with known_torch_state():
        return {regime: _timed(config, x, y, *plan) for regime, plan in plans.items()}


def _timed(config: AccumulationConfig, x: torch.Tensor, y: torch.Tensor, batches: list, accumulation_steps: int) -> TimedRun:
    model = make_model(config.seed)
    optimizer = make_optimizer(config.optimizer, model.parameters(), config.learning_rate)
    with torch.no_grad():
        seconds, losses = [0.0], [mse(model(x), y).item()]
    clock = {"spent": 0.0, "since": 0.0}

    def after_update(optimizer, args, kwargs) -> None:  # the clock stops while the loss is taken
        clock["spent"] += time.perf_counter() - clock["since"]
        with torch.no_grad():
            seconds.append(clock["spent"])
            losses.append(mse(model(x), y).item())
        clock["since"] = time.perf_counter()

    handle = optimizer.register_step_post_hook(after_update)
    clock["since"] = time.perf_counter()
    train(model, optimizer, mse, batches, accumulation_steps, max_norm=None)
    handle.remove()
    return TimedRun(seconds, losses)


def race_table(runs: dict[str, TimedRun]) -> Table:
    """The loss each regime had reached after a quarter, half and all of the accumulated run's time; the note
    gives one accumulated update's cost in big-batch updates."""
    def per_update(run: TimedRun) -> float:
        return run.seconds[-1] / (len(run.seconds) - 1)

    budgets = [runs["accumulated"].seconds[-1] * f for f in (0.25, 0.5, 1.0)]
    regimes = ("accumulated", "big_batch", "small_batches")
    rows = [[f"{b * 1000:.1f}", *(f"{runs[r].loss_at(b):.4f}" for r in regimes)] for b in budgets]
    ratio = per_update(runs["accumulated"]) / per_update(runs["big_batch"])
    return Table(["after ms", "accumulated", "big batch", "small batches"], rows,
                 note=f"one accumulated update costs {ratio:.1f} x a big-batch update here")
