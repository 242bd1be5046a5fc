"""K schedules: K warmed up from the noise scale measured in training, and how an LR schedule counts when K changes."""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import torch

from widgets.core.config import check_float, check_int
from widgets.core.loops import train, train_loop
from widgets.core.mistakes import MISTAKES
from widgets.lessons.researcher_9.adam_k import (
    AdamHyper, Regression, SeedRows, scale_adam, seed_rows_items, seed_rows_mse, set_hyper,
)
from widgets.research.noise_scale import window_noise

COUNTINGS = ("updates", "micro_steps", "micro_steps // K")
EMA_DECAY, SETTLE = 0.9, 10  # B_simple's smoothing, and the updates K waits before following it


def next_k(b_simple: float, micro_batch_size: int, k_now: int, k_max: int) -> int:
    """K for the next update: B_simple in micro-batches of b, never below the K in use, never above
    k_max."""
    if math.isnan(b_simple):
        return k_now
    wanted = min(k_max, b_simple / micro_batch_size)  # inf (noise swamps the signal) -> k_max
    return max(k_now, math.floor(wanted))


@dataclass(frozen=True)
class KRun:
    """Per update: K, examples so far, the excess loss and the smoothed B_simple; `reached`: the first update at target."""

    ks: list[int]
    examples: list[int]
    losses: list[float]
    b_simple: list[float]
    reached: int | None

    @property
    def examples_to_target(self) -> int | None:
        return None if self.reached is None else self.examples[self.reached]

    @property
    def updates_to_target(self) -> int | None:
        return None if self.reached is None else self.reached + 1


def train_k_schedule(problem: Regression, seed_index: int, base: AdamHyper, micro_batch_size: int, k_start: int,
                     k_max: int, target: float, warm_up: bool = True) -> KRun:
    """Adam on row `seed_index` from K = k_start to the target or the stream's end; with `warm_up`, K follows `next_k`.

    K waits SETTLE updates for the EMA to settle: single windows of small K give wild estimates."""
    s = check_int("seed_index", seed_index, 0, problem.seeds - 1)
    b = check_int("micro_batch_size", micro_batch_size, 1, problem.x.shape[1])
    k0 = check_int("k_start", k_start, 2, problem.x.shape[1] // b)  # the estimator needs K >= 2
    k_max = check_int("k_max", k_max, k0, problem.x.shape[1] // b)
    target = check_float("target", target, 0.0, math.inf)
    x, y, w_star = problem.x[s:s + 1], problem.y[s:s + 1], problem.w_star[s:s + 1]
    model = SeedRows(problem.w0[s:s + 1])
    optimizer = torch.optim.Adam(model.parameters(), lr=base.lr, betas=(base.beta1, base.beta2), eps=base.eps)
    shares: list[torch.Tensor] = []
    model.weight.register_hook(lambda grad: shares.append(grad.detach().reshape(-1).clone()))  # one per micro-step
    K, used, smooth_sq, smooth_trace = k0, 0, 0.0, 0.0
    run = KRun([], [], [], [], None)
    while used + K * b <= x.shape[1]:
        window = [(x[:, i:i + b], y[:, i:i + b]) for i in range(used, used + K * b, b)]
        shares.clear()
        train_loop(model, optimizer, seed_rows_mse, window, K, items=seed_rows_items)
        used += K * b
        micro_grads = torch.stack(shares).double() * K  # each share is 1/K of its micro-batch's mean gradient
        grad_sq, trace = window_noise(micro_grads.unsqueeze(0), b)  # researcher_3's window estimator
        t = len(run.ks) + 1  # EMA of |G|^2 and tr(Sigma) separately, bias-corrected, then the ratio
        smooth_sq = EMA_DECAY * smooth_sq + (1 - EMA_DECAY) * float(grad_sq[0])
        smooth_trace = EMA_DECAY * smooth_trace + (1 - EMA_DECAY) * float(trace[0])
        b_simple = smooth_trace / smooth_sq if smooth_sq > 0 else math.inf  # (bias corrections cancel)
        run.ks.append(K)
        run.examples.append(used)
        run.losses.append(float((model.weight.detach() - w_star).pow(2).sum()))
        run.b_simple.append(b_simple)
        if run.losses[-1] <= target:
            return KRun(run.ks, run.examples, run.losses, run.b_simple, t - 1)
        if warm_up and t >= SETTLE:
            new_k = next_k(b_simple, b, K, k_max)
            if new_k != K:
                set_hyper(optimizer, scale_adam(base, new_k / k0, "half_life_betas"))  # Adam follows the batch
                K = new_k
    return run


def scheduler_positions(ks: list[int], counting: str) -> list[int]:
    """An LR schedule's position after each update counted in updates, micro-steps, or micro-steps // K."""
    if counting not in COUNTINGS:
        raise ValueError(f"counting must be one of {COUNTINGS}, got {counting!r}")
    if not ks or any(isinstance(k, bool) or not isinstance(k, int) or k < 1 for k in ks):
        raise ValueError(f"ks must be a non-empty list of whole numbers >= 1, got {ks!r}")
    positions, micro_steps = [], 0
    for update, k in enumerate(ks, start=1):
        micro_steps += k
        positions.append({"updates": update, "micro_steps": micro_steps, "micro_steps // K": micro_steps // k}[counting])
    return positions


def scheduler_after_train_loop(ks: list[int], bug: bool = False) -> int:
    """The LambdaLR's count after the lab's `train` runs one update per K of `ks`: len(ks)."""
    scheduler_positions(ks, "updates")  # the same check of ks
    model = torch.nn.Linear(1, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
    data = [(torch.ones(1, 1), torch.zeros(1, 1))] * max(ks)
    loop = MISTAKES["scheduler_every_micro_step"].loop if bug else train
    with warnings.catch_warnings():  # torch warns at the bug's first early scheduler step: the bug shown here
        warnings.simplefilter("ignore", UserWarning)
        for k in ks:
            loop(model, optimizer, torch.nn.functional.mse_loss, data[:k], k, scheduler, max_norm=None)
    return scheduler.last_epoch
