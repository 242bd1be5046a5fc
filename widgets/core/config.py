"""The run configuration and the input checks every public function shares; torch-free, so a bad
value is caught here, named with its allowed range, before anything reaches torch."""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

from widgets.core.mistakes import MISTAKES, check_mistake

# The optimizers a run can use: its name in a config -> the torch.optim class it builds
# (widgets.core.training.make_optimizer), which is also its label on the explorer.
OPTIMIZERS: dict[str, str] = {"sgd": "SGD", "adamw": "AdamW"}
OPTIMIZER_NAMES: tuple[str, ...] = tuple(OPTIMIZERS)


def check_int(name: str, value: object, low: int, high: int | None = None) -> int:
    """Return `value` if it is a whole number in [low, high]; else raise naming `name`."""
    allowed = f"a whole number from {low} to {high}" if high is not None else f"a whole number >= {low}"
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be {allowed}, got {value!r} ({type(value).__name__})")
    if value < low or (high is not None and value > high):
        raise ValueError(f"{name} must be {allowed}, got {value}")
    return int(value)


def check_float(name: str, value: object, low: float, high: float, *, low_inclusive: bool = False) -> float:
    """Return `value` as a float if it is a finite number in (low, high] (or [low, high])."""
    bracket = "[" if low_inclusive else "("
    allowed = f"a number in {bracket}{low}, {high}]"
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be {allowed}, got {value!r} ({type(value).__name__})")
    value = float(value)
    too_low = value < low if low_inclusive else value <= low
    if math.isnan(value) or too_low or value > high:
        raise ValueError(f"{name} must be {allowed}, got {value}")
    return value


@dataclass(frozen=True)
class AccumulationConfig:
    """One accumulation experiment: K micro-batches of b examples make one update of K*b examples.

    `tail_micro_batches` adds a last, shorter window (0 <= tail < K); `max_grad_norm` clips once per
    update (None: off); `warmup_updates` ramps the learning rate linearly (0: constant); every regime
    gets the same. `mistake` (None or a name of `MISTAKES`) runs the accumulated regime with that
    mistake's loop, and a mistake missing the setting it needs is refused.
    """

    accumulation_steps: int = 4
    micro_batch_size: int = 8
    learning_rate: float = 0.1
    num_updates: int = 8
    tail_micro_batches: int = 0
    num_examples: int = 1024
    seed: int = 0
    mistake: str | None = None
    max_grad_norm: float | None = None
    warmup_updates: int = 0
    optimizer: str = "sgd"

    def __post_init__(self) -> None:
        check_int("num_examples", self.num_examples, 1, 100_000)
        check_int("accumulation_steps", self.accumulation_steps, 1, self.num_examples)
        check_int("micro_batch_size", self.micro_batch_size, 1, self.num_examples)
        check_float("learning_rate", self.learning_rate, 0.0, 10.0)
        check_int("num_updates", self.num_updates, 1, 1000)
        check_int("tail_micro_batches", self.tail_micro_batches, 0, self.accumulation_steps - 1)
        check_int("seed", self.seed, 0, 2**31 - 1)
        check_mistake(self.mistake)
        if self.max_grad_norm is not None:
            object.__setattr__(self, "max_grad_norm", check_float("max_grad_norm", self.max_grad_norm, 0.0, 1e6))
        check_int("warmup_updates", self.warmup_updates, 0, 1000)
        if self.optimizer not in OPTIMIZER_NAMES:
            raise ValueError(f"optimizer must be one of {OPTIMIZER_NAMES}, got {self.optimizer!r}")
        unmet = self.mistake and MISTAKES[self.mistake].waits_for(
            tail_micro_batches=self.tail_micro_batches, max_grad_norm=self.max_grad_norm, warmup_updates=self.warmup_updates)
        if unmet:
            raise ValueError(f"mistake: {self.mistake} needs " + "; ".join(unmet.values()))
        if self.effective_batch_size > self.num_examples:
            raise ValueError(
                f"accumulation_steps x micro_batch_size = {self.accumulation_steps} x "
                f"{self.micro_batch_size} = {self.effective_batch_size} exceeds num_examples = "
                f"{self.num_examples}; lower accumulation_steps or micro_batch_size"
            )

    @property
    def effective_batch_size(self) -> int:
        """K * b: the examples behind one update."""
        return self.accumulation_steps * self.micro_batch_size

    @property
    def total_micro_steps(self) -> int:
        """Micro-steps in the whole run, the uneven tail included."""
        return self.accumulation_steps * self.num_updates + self.tail_micro_batches

    @property
    def total_updates(self) -> int:
        """Updates in the whole run: one per full window, plus one for a tail window."""
        return self.num_updates + (1 if self.tail_micro_batches else 0)


def check_config(config: object, name: str = "config") -> AccumulationConfig:
    """Return `config` if it is an `AccumulationConfig`; else raise naming `name`."""
    if not isinstance(config, AccumulationConfig):
        raise TypeError(f"{name} must be an AccumulationConfig, got {type(config).__name__}")
    return config
