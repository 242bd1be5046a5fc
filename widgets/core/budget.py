"""The ceilings a builder checks before it allocates or trains, so one learner cannot take a shared hub's memory.

    LAB_MEMORY_LIMIT_MB   bytes one process may allocate for one call (default 1024 MB)
    LAB_TIME_LIMIT_S      seconds one training call may run (default 300 s)

Estimates are arithmetic on the sizes (no torch here), deliberately on the high side.
"""
from __future__ import annotations

import math
import os

MEMORY_ENV, DEFAULT_MEMORY_MB = "LAB_MEMORY_LIMIT_MB", 1024
TIME_ENV, DEFAULT_TIME_S = "LAB_TIME_LIMIT_S", 300
FLOAT32 = 4
# Bytes one small object takes, rounded up: a Python slice with its two ints and its list slot, and a
# tensor view (tensor_split's pieces: the C++ tensor and its Python handle; ~1 KB measured per piece).
PY_OBJECT, TENSOR_VIEW = 128, 1024
# Conservative speed of one CPU thread on the lab's small models (measured ~5-20 GFLOP/s; take the low end).
FLOPS_PER_SECOND = 2e9


class BudgetError(ValueError):
    """The sizes asked for would cost more memory or time than the ceiling allows."""


def _limit(env: str, default: float) -> float:
    text = os.environ.get(env)
    if text is None or text.strip() == "":
        return float(default)
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise BudgetError(f"${env} must be a positive number, got {text!r}")
    return value


def memory_limit_bytes() -> int:
    """The ceiling in bytes: $LAB_MEMORY_LIMIT_MB megabytes (default 1024)."""
    return int(_limit(MEMORY_ENV, DEFAULT_MEMORY_MB) * 2**20)


def time_limit_s() -> float:
    """The ceiling in seconds: $LAB_TIME_LIMIT_S (default 300)."""
    return _limit(TIME_ENV, DEFAULT_TIME_S)


def _size(n: float) -> str:
    n = float(n)
    return f"{n / 2**30:.1f} GB" if n >= 2**30 else f"{n / 2**20:.0f} MB"


def check_memory(what: str, estimate_bytes: float) -> float:
    """Raise BudgetError if `what` would need more than the memory ceiling; else return the estimate."""
    limit = memory_limit_bytes()
    if estimate_bytes > limit:
        raise BudgetError(
            f"{what} would need about {_size(estimate_bytes)}, over this lab's limit of {_size(limit)} per process "
            f"(${MEMORY_ENV}, default {DEFAULT_MEMORY_MB} MB; on a shared hub it protects the other learners' kernels): "
            "choose smaller sizes, or raise the limit on a machine of your own")
    return estimate_bytes


def check_time(what: str, estimate_s: float) -> float:
    """Raise BudgetError if `what` would run longer than the time ceiling; else return the estimate."""
    limit = time_limit_s()
    if estimate_s > limit:
        raise BudgetError(
            f"{what} would run about {estimate_s:.0f} s, over this lab's limit of {limit:g} s per call "
            f"(${TIME_ENV}, default {DEFAULT_TIME_S} s): choose smaller sizes, or raise the limit on a machine of your own")
    return estimate_s
