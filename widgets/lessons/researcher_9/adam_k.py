"""Adam when K grows the batch k-fold: Malladi's square-root rule, betas kept by half-life, AdamW's timescale.

'half_life_betas' takes Malladi's lr and eps with both betas by half-life (beta**k, Marek et al. 2025). S seeds
run as the rows of one (S, dim) weight, through the lab's loop `train_loop`."""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

import torch

from widgets.core.config import FLOAT32, check_float, check_int, check_memory
from widgets.core.loops import train_loop
from widgets.research.adam_rules import malladi_scaled, same_half_life

RULES = ("unchanged", "lr_only", "malladi", "half_life_betas")


@dataclass(frozen=True)
class AdamHyper:
    """Adam's hyperparameters for one effective batch: learning rate, the two betas and eps."""

    lr: float
    beta1: float
    beta2: float
    eps: float

    def __post_init__(self):
        check_float("lr", self.lr, 0.0, 10.0)
        for name in ("beta1", "beta2"):
            if check_float(name, getattr(self, name), 0.0, 1.0, low_inclusive=True) == 1.0:
                raise ValueError(f"{name} must be a number in [0.0, 1.0), got 1.0")
        check_float("eps", self.eps, 0.0, 1.0)


def half_life_examples(beta: float, batch: int) -> float:
    """How many examples a moving average with factor `beta` takes to halve a gradient's weight."""
    if check_float("beta", beta, 0.0, 1.0) == 1.0:
        raise ValueError("beta must be a number in (0.0, 1.0), got 1.0")
    return check_int("batch", batch, 1) * math.log(0.5) / math.log(beta)


def scale_adam(base: AdamHyper, k: float, rule: str) -> AdamHyper:
    """`base`'s hyperparameters for a batch k times larger, by one of RULES."""
    k = check_float("k", k, 0.0, 1e6)
    if rule not in RULES:
        raise ValueError(f"rule must be one of {RULES}, got {rule!r}")
    if rule == "unchanged":
        return base
    if rule == "lr_only":
        return replace(base, lr=base.lr * math.sqrt(k))
    if rule == "malladi":
        worst = min(base.beta1, base.beta2)  # the smaller beta turns negative first
        if k * (1 - worst) >= 1:
            raise ValueError(f"k must be below 1 / (1 - beta) = {1 / (1 - worst):.4g} for the Malladi rule "
                             f"(beta = {worst}), got k = {k:g}: a beta would be 0 or negative")
        return AdamHyper(*malladi_scaled(base.lr, base.beta1, base.beta2, base.eps, k))
    return AdamHyper(base.lr * math.sqrt(k), same_half_life(base.beta1, k), same_half_life(base.beta2, k),
                     base.eps / math.sqrt(k))


def set_hyper(optimizer: torch.optim.Optimizer, hyper: AdamHyper) -> None:
    """Write `hyper` into every param group of an Adam or AdamW optimizer (its state is kept)."""
    for group in optimizer.param_groups:
        group.update(lr=hyper.lr, betas=(hyper.beta1, hyper.beta2), eps=hyper.eps)


@dataclass(frozen=True)
class Regression:
    """S noisy linear-regression streams: x (S, n, dim), y (S, n), w_star and the start w0 (S, dim)."""

    x: torch.Tensor
    y: torch.Tensor
    w_star: torch.Tensor
    w0: torch.Tensor
    noise_std: float

    @property
    def seeds(self) -> int:
        return self.x.shape[0]

    def excess_loss(self, w: torch.Tensor) -> torch.Tensor:
        """The population loss above its floor noise_std^2, |w - w_star|^2, per seed (shape (..., S))."""
        return (w - self.w_star).pow(2).sum(-1)


def make_regression(dim: int = 8, noise_std: float = 3.0, distance: float = 2.0, examples: int = 4096,
                    seeds: int = 5) -> Regression:
    """`seeds` streams of `examples` fresh examples each; seed s draws its w_star, start and data from torch seed s."""
    d = check_int("dim", dim, 1, 4096)
    sigma = check_float("noise_std", noise_std, 0.0, 1e3, low_inclusive=True)
    r = check_float("distance", distance, 0.0, 1e3)
    n = check_int("examples", examples, 1, 10_000_000)
    s = check_int("seeds", seeds, 1, 1000)
    check_memory(f"make_regression(dim={d}, examples={n}, seeds={s})", s * n * (d + 2) * FLOAT32 * 2)
    rows = []
    for seed in range(s):
        g = torch.Generator().manual_seed(seed)
        w_star = torch.randn(d, generator=g)
        direction = torch.randn(d, generator=g)
        x = torch.randn(n, d, generator=g)
        y = x @ w_star + sigma * torch.randn(n, generator=g)
        rows.append((x, y, w_star, w_star + r * direction / direction.norm()))
    x, y, w_star, w0 = (torch.stack(t) for t in zip(*rows))
    return Regression(x, y, w_star, w0, sigma)


class SeedRows(torch.nn.Module):
    """A linear model without bias per seed: weight (S, dim); inputs (S, b, dim) -> predictions (S, b)."""

    def __init__(self, w0: torch.Tensor):
        super().__init__()
        self.weight = torch.nn.Parameter(w0.detach().clone())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.einsum("sbd,sd->sb", x, self.weight)


def seed_rows_mse(prediction: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Each seed's mean squared error, summed over seeds: row s's gradient is seed s's own."""
    return (prediction - target).pow(2).mean(dim=1).sum()


def seed_rows_items(targets: torch.Tensor) -> int:
    """What one seed's mean loss averages over: the micro-batch's examples (dimension 1, not the seeds)."""
    return targets.shape[1]


def adam_trajectory(problem: Regression, hyper: AdamHyper, micro_batch_size: int, accumulation_steps: int,
                    weight_decay: float = 0.0) -> torch.Tensor:
    """Adam (AdamW if weight_decay > 0), K micro-batches of b per update (checked by `compare_rules`): (updates, S, dim)."""
    K, b = accumulation_steps, micro_batch_size
    n = problem.x.shape[1] // (K * b) * K * b  # whole windows only: every update holds K*b examples
    batches = [(problem.x[:, i:i + b], problem.y[:, i:i + b]) for i in range(0, n, b)]
    model = SeedRows(problem.w0)
    optimizer = torch.optim.AdamW(model.parameters(), lr=hyper.lr, betas=(hyper.beta1, hyper.beta2),
                                  eps=hyper.eps, weight_decay=weight_decay)
    points: list[torch.Tensor] = []
    # watched from outside: a hook after each optimizer step records the weights (the loop is not touched)
    optimizer.register_step_post_hook(lambda *_: points.append(model.weight.detach().clone()))
    train_loop(model, optimizer, seed_rows_mse, batches, K, items=seed_rows_items)
    return torch.stack(points)


@dataclass(frozen=True)
class RuleRuns:
    """Per seed: gaps[k][rule], the mean distance to the batch-b run over its mean distance still to go to w_star,
    and final[k][rule], the excess loss at the end, against the batch-b run's reference_final."""

    gaps: dict[int, dict[str, torch.Tensor]]
    final: dict[int, dict[str, torch.Tensor]]
    reference_final: torch.Tensor


def compare_rules(problem: Regression, base: AdamHyper, micro_batch_size: int, ks: tuple[int, ...],
                  rules: tuple[str, ...] = ("lr_only", "malladi", "half_life_betas")) -> RuleRuns:
    """Batch b against batch k*b on the same examples under each rule (a rule the batch breaks is left out)."""
    if not isinstance(ks, (tuple, list)) or not ks:
        raise ValueError(f"ks must be a non-empty tuple of whole numbers >= 2, got {ks!r}")
    b = check_int("micro_batch_size", micro_batch_size, 1, problem.x.shape[1])
    for k in ks:
        check_int("k", k, 2, problem.x.shape[1] // b)
        if problem.x.shape[1] % (k * b):
            raise ValueError(f"the stream's {problem.x.shape[1]} examples must be a multiple of k*b = {k * b}")
    if not rules or not set(rules) <= set(RULES):
        raise ValueError(f"rules must be some of {RULES}, got {rules!r}")
    reference = adam_trajectory(problem, base, b, 1)  # the weights after every update of batch b
    gaps: dict[int, dict[str, torch.Tensor]] = {}
    final: dict[int, dict[str, torch.Tensor]] = {}
    for k in ks:
        gaps[k], final[k] = {}, {}
        for rule in rules:
            try:
                hyper = scale_adam(base, k, rule)
            except ValueError:
                continue
            run = adam_trajectory(problem, hyper, b, k)
            same = reference[k - 1::k]  # the batch-b run at the same examples
            gaps[k][rule] = (run - same).norm(dim=-1).mean(0) / (same - problem.w_star).norm(dim=-1).mean(0)
            final[k][rule] = problem.excess_loss(run[-1])
    return RuleRuns(gaps, final, problem.excess_loss(reference[-1]))


def adamw_tau(batch: int, lr: float, weight_decay: float, dataset_size: int) -> float:
    """AdamW's decay timescale in epochs, tau = B / (lr * weight_decay * D) (Bergsma et al., 2025)."""
    B = check_int("batch", batch, 1)
    lr = check_float("lr", lr, 0.0, 10.0)
    wd = check_float("weight_decay", weight_decay, 0.0, 1e3)
    D = check_int("dataset_size", dataset_size, 1)
    return B / (lr * wd * D)


def weight_decay_for_same_tau(batch: int, lr: float, weight_decay: float, new_batch: int, new_lr: float) -> float:
    """The weight decay that keeps tau (the decay per example) when (batch, lr) becomes (new_batch, new_lr)."""
    B, B2 = check_int("batch", batch, 1), check_int("new_batch", new_batch, 1)
    lr, lr2 = check_float("lr", lr, 0.0, 10.0), check_float("new_lr", new_lr, 0.0, 10.0)
    wd = check_float("weight_decay", weight_decay, 0.0, 1e3)
    return wd * (B2 / B) * (lr / lr2)


def adamw_shrink_per_epoch(batch: int, lr: float, weight_decay: float, dataset_size: int) -> float:
    """What torch's AdamW does to a weight of 1 with zero gradient over one epoch, measured."""
    B, D = check_int("batch", batch, 1), check_int("dataset_size", dataset_size, 1)
    if D % B:
        raise ValueError(f"dataset_size must be a multiple of batch = {B}, got {D}")
    weight = torch.nn.Parameter(torch.ones(1, dtype=torch.float64))
    optimizer = torch.optim.AdamW([weight], lr=check_float("lr", lr, 0.0, 10.0),
                                  weight_decay=check_float("weight_decay", weight_decay, 0.0, 1e3))
    for _ in range(D // B):
        weight.grad = torch.zeros_like(weight)  # no loss: only the decay moves the weight
        optimizer.step()
    return float(weight.detach())
