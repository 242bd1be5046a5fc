"""Adam's hyperparameters for a batch k times larger: the two rules researcher_3 and researcher_9 use."""
from __future__ import annotations

import math


def malladi_scaled(lr: float, beta1: float, beta2: float, eps: float,
                   k: float) -> tuple[float, float, float, float]:
    """Adam's (lr, beta1, beta2, eps) for a batch k times larger by Malladi et al.'s (2022)
    square-root SDE rule.

    One update's noise falls as 1/sqrt(k), so lr x sqrt(k) and eps / sqrt(k); each average
    forgets k times faster per update (1 - beta x k), valid while k (1 - beta) < 1."""
    return (
        lr * math.sqrt(k),
        1 - k * (1 - beta1),
        1 - k * (1 - beta2),
        eps / math.sqrt(k),
    )


def same_half_life(beta: float, k: float) -> float:
    """beta**k: the beta whose half-life in examples is that of `beta` at a batch k times
    smaller."""
    return beta**k
