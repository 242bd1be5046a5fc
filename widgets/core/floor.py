"""Numbers at the rounding floor, printed as bounds so that every CPU prints the same text.

torch picks its kernels per instruction set (`ATEN_CPU_CAPABILITY`: default, avx2, avx512), and
sums taken in another order round differently: a float64 gap of 5.6e-16 on one CPU is 7.1e-16 on
another. A notebook that prints those digits fails nbval on the other CPU. Print the bound the
claim needs instead ("below 1e-14"), chosen well above the spread, and the text never moves.
"""
from __future__ import annotations

import math


def below(value: float, ceiling: float) -> str:
    """'below 1e-14' when |value| < ceiling (0 included), else the value itself, flagged.

    Choose `ceiling` as the claim's own bound (e.g. 100 ulps), not the last digits of one run.
    """
    if not math.isfinite(ceiling) or ceiling <= 0:
        raise ValueError(f"ceiling must be a finite number > 0, got {ceiling!r}")
    if math.isfinite(value) and abs(value) < ceiling:
        return f"below {ceiling:.0e}"
    return f"{value:.3g} (NOT below {ceiling:.0e})"


def order_of(value: float) -> str:
    """The decade of a value that is not at the rounding floor, e.g. 3.2e-07 -> 'about 1e-07'.

    Only for values far from a decade edge across CPUs; prefer `below` at the floor.
    """
    if value == 0 or not math.isfinite(value):
        return f"{value:g}"
    return f"about 1e{round(math.log10(abs(value))):+03d}"
