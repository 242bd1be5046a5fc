"""How exact is "exact"? Rounding between the big-batch and the accumulated gradient, measured.

The two gradients are the same sum taken in a different order, so in floating point they differ
in the last bits. This module measures by how much, over many seeds, batch sizes and two
precisions, in absolute terms and in ulps (units in the last place of the reference entry), and
which term of `allclose` (|a - b| <= atol + rtol·|b|) does the deciding. torch only.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from widgets.core.accumulation import (
    GRAD_ATOL,
    GRAD_RTOL,
    accumulated_gradient,
    big_batch_gradient,
    make_model,
    make_regression_data,
)
from widgets.core.config import check_int

_DTYPES = {"float32": torch.float32, "float64": torch.float64}


def ulp(x: torch.Tensor) -> torch.Tensor:
    """The gap from |x| to the next representable number of x's dtype, elementwise; same shape."""
    x = x.abs()
    return torch.nextafter(x, torch.full_like(x, float("inf"))) - x


@dataclass(frozen=True)
class ExactnessRow:
    """One (precision, batch size) setting over all seeds; lists hold one entry per seed."""

    dtype: str
    batch_size: int
    accumulation_steps: int
    max_abs: list[float]   # max |big - accumulated| over the gradient's entries
    max_ulps: list[float]  # max over entries of |big - accumulated| / ulp(big entry)
    allclose: list[bool]   # at the lab's tolerance (GRAD_RTOL, GRAD_ATOL)
    rtol_decides: list[bool]  # at the worst entry, rtol·|b| was larger than atol
    ulps_entry: list[float]  # |reference entry| where the ulps count is largest
    largest_entry: list[float]  # the reference gradient's largest |entry|, for scale

    def worst_seed(self) -> int:
        """The seed (index) with the largest ulps count."""
        return max(range(len(self.max_ulps)), key=self.max_ulps.__getitem__)

    def quantile(self, field: str, q: float) -> float:
        """The q-quantile (0..1) of `max_abs` or `max_ulps` over the seeds."""
        if field not in ("max_abs", "max_ulps"):
            raise ValueError(f"field must be 'max_abs' or 'max_ulps', got {field!r}")
        return float(torch.tensor(getattr(self, field), dtype=torch.float64).quantile(q))


def _compare(big: torch.Tensor, acc: torch.Tensor) -> tuple[float, float, bool, bool, float, float]:
    diff = (big - acc).abs()
    worst = int(diff.argmax())
    ulps = diff / ulp(big).clamp_min(torch.finfo(big.dtype).tiny)
    close = bool(torch.allclose(acc, big, rtol=GRAD_RTOL, atol=GRAD_ATOL))
    rtol_term = GRAD_RTOL * float(big[worst].abs())
    at_ulps = float(big[int(ulps.argmax())].abs())
    return float(diff.max()), float(ulps.max()), close, rtol_term > GRAD_ATOL, at_ulps, float(big.abs().max())


def exactness_survey(
    num_seeds: int = 100,
    batch_sizes: tuple[int, ...] = (8, 64, 512),
    accumulation_steps: int = 4,
    dtypes: tuple[str, ...] = ("float32", "float64"),
    hidden: int = 16,
) -> list[ExactnessRow]:
    """For each dtype and batch size, compare the big-batch gradient with K equal micro-batches
    (each loss scaled by its share) on `num_seeds` seeded models and datasets."""
    check_int("num_seeds", num_seeds, 1, 10_000)
    check_int("accumulation_steps", accumulation_steps, 1, 1024)
    for n in batch_sizes:
        check_int("batch_sizes entry", n, accumulation_steps, 100_000)
        if n % accumulation_steps:
            raise ValueError(f"batch_sizes entries must be multiples of accumulation_steps={accumulation_steps}, got {n}")
    bad = [d for d in dtypes if d not in _DTYPES]
    if bad or not dtypes:
        raise ValueError(f"dtypes must be a non-empty tuple of {sorted(_DTYPES)}, got {dtypes!r}")
    mse = torch.nn.functional.mse_loss
    rows = []
    for name in dtypes:
        for n in batch_sizes:
            results = []
            for seed in range(num_seeds):
                x, y = (t.to(_DTYPES[name]) for t in make_regression_data(n, seed))
                model = make_model(seed, hidden).to(_DTYPES[name])
                big = big_batch_gradient(model, x, y, mse)
                acc = accumulated_gradient(model, x, y, mse, n // accumulation_steps).accumulated
                results.append(_compare(big, acc))
            rows.append(ExactnessRow(name, n, accumulation_steps, *(list(col) for col in zip(*results))))
    return rows


# Every float32 in one binade [2**e, 2**(e+1)): 2**23 mantissas, one exponent.
FLOAT32_BINADE = 2**23


def division_round_trip(accumulation_steps: int, exponent: int = 0) -> int:
    """How many of the 2**23 float32 values x in [2**exponent, 2**(exponent+1)) give (x / K) * K != x:
    0 for a power of two (only the exponent changes), not 0 otherwise.

    Every value of the binade, not a random draw: division and multiplication are correctly
    rounded on every CPU, but torch.randn's vectorised sampler draws different last bits per
    instruction set, so a random sample would count differently on another CPU. The count is
    the same in every binade whose quotients stay normal floats: scaling x by a power of two
    only shifts the exponent of x, x / K and (x / K) * K alike.
    """
    check_int("accumulation_steps", accumulation_steps, 1, 2**20)
    check_int("exponent", exponent, -100, 100)
    mantissas = torch.arange(FLOAT32_BINADE, dtype=torch.int32) | 0x3F800000  # the bits of 1.0 .. 2 - ulp
    x = mantissas.view(torch.float32) * 2.0**exponent  # exact: a power of two
    return int(((x / accumulation_steps) * accumulation_steps != x).sum())
