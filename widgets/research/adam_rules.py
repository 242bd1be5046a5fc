"""Adam's hyperparameters for a batch k times larger: the two rules researcher_3 and researcher_9 use.

- `malladi_scaled`: the square-root SDE rule of Malladi et al. (2022), lr x sqrt(k), 1 - beta x k for
  both betas, eps / sqrt(k); defined while k (1 - beta) < 1 (it is returned as computed beyond, so a
  notebook can show the beta turning negative: callers that train check it).
- `same_half_life`: beta -> beta**k, the beta whose half-life counted in examples stays put (Marek et
  al. (2025) keep beta2's half-life in tokens this way).

Pure Python.
"""
from __future__ import annotations

import math


def malladi_scaled(lr: float, beta1: float, beta2: float, eps: float, k: float) -> tuple[float, float, float, float]:
    """Adam's (lr, beta1, beta2, eps) for a batch k times larger, by the square-root SDE rule
    of Malladi et al. (2022): the noise of one update falls as 1/sqrt(k), so the step grows by
    sqrt(k); each moving average must forget k times faster per update, since an update now holds
    k times the examples; eps shrinks with the gradient noise it is compared with.
    Valid while k (1 - beta) < 1: beyond that a beta would turn negative."""
    return (
        lr * math.sqrt(k),
        1 - k * (1 - beta1),
        1 - k * (1 - beta2),
        eps / math.sqrt(k),
    )


def same_half_life(beta: float, k: float) -> float:
    """The beta whose half-life, counted in examples, is that of `beta` at a batch k times smaller:
    one update now holds k times the examples, so it must forget as much as k updates did."""
    return beta**k
