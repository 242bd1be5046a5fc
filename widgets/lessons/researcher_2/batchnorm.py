"""Batch norm under accumulation: K micro-batches of b are ghost batch norm of size b (Hoffer et al., 2017), not
the big batch; per-example norms and frozen statistics make accumulation exact. Float64."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from widgets.core.accumulation import accumulated_gradient, big_batch_gradient
from widgets.core.config import check_int

NORMS = {
    "batch": "BatchNorm1d in training mode: statistics of the batch it is given",
    "ghost_batch": "ghost batch norm: BatchNorm statistics over groups of `ghost_size` examples",
    "layer": "LayerNorm: statistics of each example's own features",
    "group": "GroupNorm (4 groups): statistics of groups of each example's own features",
    "batch_frozen": "BatchNorm1d in eval mode: the running statistics, fixed during the update",
}
DTYPE = torch.float64
FEATURES, HIDDEN = 6, 16


class GhostBatchNorm1d(torch.nn.BatchNorm1d):
    """BatchNorm whose statistics come from consecutive groups of `ghost_size` examples, in one
    pass."""

    def __init__(self, num_features: int, ghost_size: int):
        # 16 bytes each, checked first
        super().__init__(check_int("num_features", num_features, 1, 4096))
        self.ghost_size = check_int("ghost_size", ghost_size, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n = x.shape[0]
        if n % self.ghost_size:
            raise ValueError(f"the batch ({n} examples) must be a multiple of ghost_size = "
                             f"{self.ghost_size}")
        groups = x.reshape(n // self.ghost_size, self.ghost_size, -1)
        mean = groups.mean(dim=1, keepdim=True)
        var = groups.var(dim=1, unbiased=False, keepdim=True)
        normed = ((groups - mean) / torch.sqrt(var + self.eps)).reshape(n, -1)
        return normed * self.weight + self.bias


def make_norm_model(norm: str, seed: int = 0, ghost_size: int = 4) -> torch.nn.Module:
    """Linear(6, 16) -> norm -> ReLU -> Linear(1); the same weights for every `norm` with the same seed."""
    if norm not in NORMS:
        raise ValueError(f"norm must be one of {sorted(NORMS)}, got {norm!r}")
    check_int("seed", seed, 0, 2**31 - 1)
    hidden = HIDDEN
    layer = {
        "batch": lambda: torch.nn.BatchNorm1d(hidden),
        "batch_frozen": lambda: torch.nn.BatchNorm1d(hidden),
        "ghost_batch": lambda: GhostBatchNorm1d(hidden, ghost_size),
        "layer": lambda: torch.nn.LayerNorm(hidden),
        "group": lambda: torch.nn.GroupNorm(4, hidden),
    }[norm]()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        first, last = torch.nn.Linear(FEATURES, hidden), torch.nn.Linear(hidden, 1)
    model = torch.nn.Sequential(first, layer, torch.nn.ReLU(), last).to(DTYPE)
    if norm == "batch_frozen":
        with torch.no_grad():  # statistics as if learnt earlier: some mean, some spread
            layer.running_mean.copy_(torch.linspace(-0.5, 0.5, hidden, dtype=DTYPE))
            layer.running_var.copy_(torch.linspace(0.5, 2.0, hidden, dtype=DTYPE))
        model.eval()
    return model


def make_norm_data(num_examples: int = 64, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """x (n, 6) with feature scales from 0.5 to 3, y (n, 1) a noisy non-linear target; float64."""
    check_int("num_examples", num_examples, 2, 100_000)
    check_int("seed", seed, 0, 2**31 - 1)
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(num_examples, FEATURES, generator=g, dtype=DTYPE) * torch.linspace(0.5, 3.0, FEATURES, dtype=DTYPE)
    y = torch.tanh(x[:, :1]) + 0.1 * torch.randn(num_examples, 1, generator=g, dtype=DTYPE)
    return x, y


def _micro_slices(n: int, accumulation_steps: int) -> list[slice]:
    check_int("accumulation_steps", accumulation_steps, 1, n)
    if n % accumulation_steps:
        raise ValueError(f"accumulation_steps must divide the {n} examples of the batch, got {accumulation_steps}")
    b = n // accumulation_steps
    if b < 2:
        raise ValueError(f"accumulation_steps = {accumulation_steps} leaves micro-batches of 1 example; "
                         f"batch norm needs at least 2 (use accumulation_steps <= {n // 2})")
    return [slice(i, i + b) for i in range(0, n, b)]


@dataclass(frozen=True)
class NormComparison:
    """Big-batch vs accumulated gradient for one norm layer and one K."""

    norm: str
    accumulation_steps: int
    big: torch.Tensor
    accumulated: torch.Tensor

    @property
    def max_abs_diff(self) -> float:
        return float((self.big - self.accumulated).abs().max())

    @property
    def allclose(self) -> bool:
        return bool(torch.allclose(self.big, self.accumulated, rtol=1e-7, atol=1e-10))


def big_batch_norm_gradient(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """The MSE gradient of the whole batch in one pass; flat (P,). Running statistics are left as found."""
    state = {k: v.clone() for k, v in model.state_dict().items()}
    grad = big_batch_gradient(model, x, y, torch.nn.functional.mse_loss)
    model.load_state_dict(state)
    return grad


def accumulated_norm_gradient(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor,
                              accumulation_steps: int) -> torch.Tensor:
    """K equal micro-batches, each mean loss weighted 1/K (the correct scaling); flat (P,)."""
    micro_batch_size = _micro_slices(x.shape[0], accumulation_steps)[0].stop
    state = {k: v.clone() for k, v in model.state_dict().items()}
    grad = accumulated_gradient(model, x, y, torch.nn.functional.mse_loss, micro_batch_size).accumulated
    model.load_state_dict(state)
    return grad


def compare_norm(norm: str, accumulation_steps: int, num_examples: int = 64, seed: int = 0) -> NormComparison:
    """Accumulated vs big-batch gradient for a fresh model with `norm` (ghost size = micro-batch size)."""
    check_int("num_examples", num_examples, 2, 100_000)
    _micro_slices(num_examples, accumulation_steps)
    model = make_norm_model(norm, seed=seed, ghost_size=num_examples // accumulation_steps)
    x, y = make_norm_data(num_examples, seed=seed)
    return NormComparison(norm, accumulation_steps, big_batch_norm_gradient(model, x, y),
                          accumulated_norm_gradient(model, x, y, accumulation_steps))


@dataclass(frozen=True)
class RunningStats:
    """BatchNorm's running mean after one update done both ways, and how many updates each counted."""

    big_mean: torch.Tensor
    accumulated_mean: torch.Tensor
    big_batches_tracked: int
    accumulated_batches_tracked: int


def running_stats_after_one_update(accumulation_steps: int, num_examples: int = 64, seed: int = 0,
                                   momentum: float = 0.1) -> RunningStats:
    """One update's forwards in training mode: the big batch moves the running mean once, accumulation K times."""
    slices = _micro_slices(num_examples, accumulation_steps)
    x, _ = make_norm_data(num_examples, seed=seed)
    big, acc = make_norm_model("batch", seed=seed), make_norm_model("batch", seed=seed)
    for model in (big, acc):
        model[1].momentum = momentum
    with torch.no_grad():
        big(x)
        for part in slices:
            acc(x[part])
    return RunningStats(big[1].running_mean.clone(), acc[1].running_mean.clone(),
                        int(big[1].num_batches_tracked), int(acc[1].num_batches_tracked))
