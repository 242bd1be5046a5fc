"""Numbers at the rounding floor, printed as bounds ("below 1e-14") so that every CPU prints the same text:
torch picks its kernels per instruction set, and sums taken in another order round differently (a float64
gap of 5.6e-16 on one CPU is 7.1e-16 on another), which nbval on the other CPU would catch."""
from __future__ import annotations

import math


def below(value: float, ceiling: float) -> str:
    """'below 1e-14' when |value| < ceiling (0 included), else the value itself, flagged; `ceiling`: the claim's bound."""
    if not math.isfinite(ceiling) or ceiling <= 0:
        raise ValueError(f"ceiling must be a finite number > 0, got {ceiling!r}")
    if math.isfinite(value) and abs(value) < ceiling:
        return f"below {ceiling:.0e}"
    return f"{value:.3g} (NOT below {ceiling:.0e})"

