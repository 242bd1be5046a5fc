"""Where settings enter: the run configuration, the input checks every public function shares, and the ceilings
a builder checks before it allocates or trains; torch-free, so a bad value is named before it reaches torch."""
from __future__ import annotations

import math
import numbers
import os
from dataclasses import dataclass

from widgets.core.mistakes import MISTAKES

# The optimizers a run can use: its name in a config -> the torch.optim class it builds
# (widgets.core.training.make_optimizer), which is also its label on the explorer.
OPTIMIZERS: dict[str, str] = {"sgd": "SGD", "adamw": "AdamW"}
OPTIMIZER_NAMES: tuple[str, ...] = tuple(OPTIMIZERS)

# A setting a mistake may need before it can change anything: what to set, and the test that it is set.
NEEDS = {
    "tail_micro_batches": ("a short last window: set tail_micro_batches > 0 (which needs K >= 2)", lambda v: v > 0),
    "max_grad_norm": ("gradient clipping: set max_grad_norm", lambda v: v is not None),
    # a warmup of one update is the same whichever way it is stepped: the first update always
    # uses the schedule's first value
    "warmup_updates": ("a warmup of at least 2 updates: set warmup_updates >= 2", lambda v: v >= 2),
}


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


def check_mistake(name: object) -> str | None:
    """`name` if it is None (the correct loop) or a mistake of MISTAKES; else raise listing them."""
    if name is None or (isinstance(name, str) and name in MISTAKES):
        return name
    if not isinstance(name, str):
        raise TypeError(f"mistake must be None or one mistake's name (a str), got {name!r} ({type(name).__name__}); "
                        f"one of {list(MISTAKES)}")
    raise ValueError(f"mistake: unknown name {name!r}; allowed: None or one of {list(MISTAKES)}")


def waits_for(mistake: str | None, **settings: object) -> dict[str, str]:
    """{setting: what to set} for each setting `mistake` needs that `settings` lack."""
    needs = MISTAKES[mistake].needs if mistake in MISTAKES else ()
    return {need: NEEDS[need][0] for need in needs if need in settings and not NEEDS[need][1](settings[need])}


@dataclass(frozen=True)
class AccumulationConfig:
    """One accumulation experiment: K micro-batches of b examples make one update of K*b examples.

    `tail_micro_batches` adds a last, shorter window (0 <= tail < K); `max_grad_norm` clips once per update
    (None: off); `warmup_updates` ramps the learning rate linearly (0: constant); `mistake` (None or a name
    of `MISTAKES`) runs the accumulated regime with that mistake's loop."""

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
        unmet = waits_for(self.mistake, tail_micro_batches=self.tail_micro_batches, max_grad_norm=self.max_grad_norm,
                          warmup_updates=self.warmup_updates)
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


def check_config(config: object) -> AccumulationConfig:
    """Return `config` if it is an `AccumulationConfig`; else raise naming it."""
    if not isinstance(config, AccumulationConfig):
        raise TypeError(f"config must be an AccumulationConfig, got {type(config).__name__}")
    return config


# --- the ceilings: one learner cannot take a shared hub's memory or time ----------------------------
# Estimates are arithmetic on the sizes (no torch here), deliberately on the high side.

MEMORY_ENV, DEFAULT_MEMORY_MB = "LAB_MEMORY_LIMIT_MB", 1024  # bytes one process may allocate for one call
TIME_ENV, DEFAULT_TIME_S = "LAB_TIME_LIMIT_S", 300  # seconds one training call may run
FLOAT32 = 4
# Bytes one small object takes, rounded up: a Python slice with its two ints and its list slot, and a
# tensor view (tensor_split's pieces: the C++ tensor and its Python handle; ~1 KB measured per piece).
PY_OBJECT, TENSOR_VIEW = 128, 1024
# Conservative speed of one CPU thread on the lab's small models (measured ~5-20 GFLOP/s; take the low end).
FLOPS_PER_SECOND = 2e9


class BudgetError(ValueError):
    """The sizes asked for would cost more memory or time than the ceiling allows."""


def _limit(env: str, default: float) -> float:
    text = os.environ.get(env, "").strip() or str(default)
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise BudgetError(f"${env} must be a positive number, got {os.environ.get(env)!r}")
    return value


def _size(n: float) -> str:
    return f"{n / 2**30:.1f} GB" if n >= 2**30 else f"{n / 2**20:.0f} MB"


def check_memory(what: str, estimate_bytes: float) -> float:
    """Raise BudgetError if `what` would need more than $LAB_MEMORY_LIMIT_MB megabytes; else return the estimate."""
    limit = int(_limit(MEMORY_ENV, DEFAULT_MEMORY_MB) * 2**20)
    if estimate_bytes > limit:
        raise BudgetError(
            f"{what} would need about {_size(estimate_bytes)}, over this lab's limit of {_size(limit)} per process "
            f"(${MEMORY_ENV}, default {DEFAULT_MEMORY_MB} MB; on a shared hub it protects the other learners' kernels): "
            "choose smaller sizes, or raise the limit on a machine of your own")
    return estimate_bytes


def check_time(what: str, estimate_s: float) -> float:
    """Raise BudgetError if `what` would run longer than $LAB_TIME_LIMIT_S seconds; else return the estimate."""
    limit = _limit(TIME_ENV, DEFAULT_TIME_S)
    if estimate_s > limit:
        raise BudgetError(
            f"{what} would run about {estimate_s:.0f} s, over this lab's limit of {limit:g} s per call "
            f"(${TIME_ENV}, default {DEFAULT_TIME_S} s): choose smaller sizes, or raise the limit on a machine of your own")
    return estimate_s
