"""A small real problem trained with accumulation, B_simple read off every window, and the
critical batch size measured the way McCandlish et al. (2018) measure it.

- `train_with_noise_scale`: the ordinary accumulation loop; after each micro-step the new part of
  the `.grad` pile, times K, is that micro-batch's mean gradient, so every update hands
  `estimate_noise_scale` one window for free.
- `sweep_effective_batch`: steps (updates) and examples to reach a target loss as K grows at a
  fixed b, each at its best learning rate on a grid; `fit_tradeoff` fits
  (S/S_min - 1)(E/E_min - 1) = 1, i.e. S = S_min + E_min / B, and B_crit = E_min / S_min.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Iterable, Sequence

import torch

from widgets.core.accumulation import flat_weights
from widgets.core.budget import FLOAT32, check_memory, check_time
from widgets.core.config import check_float, check_int
from widgets.research.noise_scale import estimate_noise_scale, smoothed_b_simple

INPUTS, CLASSES, HIDDEN = 8, 4, 32
OPTIMIZERS = ("sgd", "adam")
# High estimates for the budget checks: a micro-step of this MLP costs 0.3-1 ms on an idle CPU thread
# and up to 3.5 ms on a busy shared one (measured), plus about 0.7 us per example forward and backward.
MICRO_STEP_S, EXAMPLE_S = 2e-3, 2e-6
# Bytes per example: the full-data loss (hidden, tanh, logits, log-softmax, float32) and one
# micro-batch with its graph and gradients (index, inputs, activations and their gradients).
LOSS_BYTES = (2 * HIDDEN + 2 * CLASSES) * FLOAT32
GRAPH_BYTES = 8 + (INPUTS + 4 * HIDDEN + 4 * CLASSES) * FLOAT32


def training_estimate(num_examples: int, micro_batch_size: int, accumulation_steps: int,
                      num_updates: int) -> tuple[int, float]:
    """(bytes, seconds), high estimates, of `num_updates` updates of K micro-batches of b on a
    problem of n examples, the full-data loss taken before each update."""
    n, b, k = num_examples, micro_batch_size, accumulation_steps
    seconds = num_updates * (k * (MICRO_STEP_S + b * EXAMPLE_S) + n * EXAMPLE_S)
    return n * LOSS_BYTES + b * GRAPH_BYTES, seconds


def _examples(problem: object) -> int:
    if not isinstance(problem, Problem):
        raise TypeError(f"problem must be a Problem (from make_problem), got {type(problem).__name__}")
    return problem.x.shape[0]


def _check_training(what: str, num_examples: int, micro_batch_size: int, accumulation_steps: int,
                    num_updates: int) -> None:
    memory, seconds = training_estimate(num_examples, micro_batch_size, accumulation_steps, num_updates)
    check_memory(what, memory)
    check_time(what, seconds)


@dataclass(frozen=True)
class Problem:
    """A 4-class problem in 8 dimensions labelled by a random teacher network, 10 % labels flipped."""

    x: torch.Tensor        # (n, 8) float32
    y: torch.Tensor        # (n,) int64
    seed: int


def make_problem(num_examples: int = 4096, seed: int = 0) -> Problem:
    """The classification problem of notebook researcher_3, fixed by `seed`."""
    n = check_int("num_examples", num_examples, 16, 1_000_000)
    seed = check_int("seed", seed, 0, 2**31 - 1)
    # float32 x (n, 8), the teacher's two (n, 16) hiddens and (n, 4) scores; int64 labels, draws and result; the flips
    check_memory(f"make_problem(num_examples={n})", n * ((INPUTS + 2 * 16 + CLASSES) * FLOAT32 + 3 * 8 + 1))
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, INPUTS, generator=g)
    teacher = torch.randn(INPUTS, 16, generator=g), torch.randn(16, CLASSES, generator=g)
    y = (torch.tanh(x @ teacher[0]) @ teacher[1]).argmax(1)
    flip = torch.rand(n, generator=g) < 0.1  # label noise: the loss cannot reach zero
    y = torch.where(flip, torch.randint(0, CLASSES, (n,), generator=g), y)
    return Problem(x, y, seed)


def make_classifier(seed: int = 0) -> torch.nn.Module:
    """An MLP 8 -> 32 -> 4 (tanh) with weights fixed by `seed`."""
    check_int("seed", seed, 0, 2**31 - 1)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return torch.nn.Sequential(torch.nn.Linear(INPUTS, HIDDEN), torch.nn.Tanh(), torch.nn.Linear(HIDDEN, CLASSES))


def _loss(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.cross_entropy(model(x), y)  # a mean over the examples


def _optimizer(name: str, params, lr: float) -> torch.optim.Optimizer:
    if name not in OPTIMIZERS:
        raise ValueError(f"optimizer must be one of {OPTIMIZERS}, got {name!r}")
    return torch.optim.SGD(params, lr=lr) if name == "sgd" else torch.optim.Adam(params, lr=lr)


@dataclass(frozen=True)
class NoiseRecord:
    """Per update: the full-data loss before it, the window's |G|^2, tr(Sigma) and B_simple, and
    the EMA-smoothed B_simple (examples)."""

    accumulation_steps: int
    micro_batch_size: int
    losses: list[float]
    grad_sq: list[float]
    trace_sigma: list[float]
    per_window: list[float]
    smoothed: list[float]


def train_with_noise_scale(
    problem: Problem, micro_batch_size: int = 8, accumulation_steps: int = 8, num_updates: int = 300,
    learning_rate: float = 0.5, ema_decay: float = 0.95, seed: int = 0, progress: Callable | None = None,
) -> NoiseRecord:
    """SGD with accumulation on `problem`, reading B_simple from every accumulation window."""
    if not isinstance(problem, Problem):
        raise TypeError(f"problem must be a Problem (from make_problem), got {type(problem).__name__}")
    b = check_int("micro_batch_size", micro_batch_size, 1, problem.x.shape[0])
    k = check_int("accumulation_steps", accumulation_steps, 2, 1024)
    n_updates = check_int("num_updates", num_updates, 1, 100_000)
    lr = check_float("learning_rate", learning_rate, 0.0, 100.0)
    _check_training(f"train_with_noise_scale(micro_batch_size={b}, accumulation_steps={k}, num_updates={n_updates}) "
                    f"on {problem.x.shape[0]} examples", problem.x.shape[0], b, k, n_updates)
    model = make_classifier(seed)
    params = list(model.parameters())
    opt = torch.optim.SGD(params, lr=lr)
    g = torch.Generator().manual_seed(seed + 1)
    losses, grad_sq, trace, per_window = [], [], [], []
    for _ in (progress or (lambda r: r))(range(n_updates)):
        with torch.no_grad():
            losses.append(float(_loss(model, problem.x, problem.y)))
        micro = torch.empty(k, sum(p.numel() for p in params))
        pile = torch.zeros_like(micro[0])
        for i in range(k):
            idx = torch.randint(0, problem.x.shape[0], (b,), generator=g)  # i.i.d. draws, as the theory assumes
            (_loss(model, problem.x[idx], problem.y[idx]) / k).backward()  # adds into .grad
            now = torch.cat([p.grad.reshape(-1) for p in params])
            micro[i] = (now - pile) * k   # this micro-batch's share of the pile, undivided: its mean gradient
            pile = now
        window = estimate_noise_scale(micro, b)
        grad_sq.append(window.grad_sq)
        trace.append(window.trace_sigma)
        per_window.append(window.b_simple)
        opt.step()
        opt.zero_grad()
    return NoiseRecord(k, b, losses, grad_sq, trace, per_window, smoothed_b_simple(grad_sq, trace, ema_decay))


def steps_to_target(
    problem: Problem, micro_batch_size: int, accumulation_steps: int, learning_rate: float, target_loss: float,
    optimizer: str = "sgd", max_updates: int = 400, warmup_updates: int = 0, seed: int = 0,
) -> int | None:
    """Updates of accumulated training (K micro-batches of b) until the full-data loss is at or
    below `target_loss`; None if it never gets there within `max_updates` (or diverges: the loss
    not finite or above twice its start)."""
    b = check_int("micro_batch_size", micro_batch_size, 1)
    k = check_int("accumulation_steps", accumulation_steps, 1)
    lr = check_float("learning_rate", learning_rate, 0.0, 1e3)
    target = check_float("target_loss", target_loss, 0.0, math.inf)
    warm = check_int("warmup_updates", warmup_updates, 0)
    updates = check_int("max_updates", max_updates, 1)
    _check_training(f"steps_to_target(micro_batch_size={b}, accumulation_steps={k}, max_updates={updates}) "
                    f"on {_examples(problem)} examples", _examples(problem), b, k, updates)
    model = make_classifier(seed)
    opt = _optimizer(optimizer, model.parameters(), lr)
    g = torch.Generator().manual_seed(seed + 1)
    first = None
    for update in range(updates):
        with torch.no_grad():
            loss = float(_loss(model, problem.x, problem.y))
        if loss <= target:
            return update
        first = loss if first is None else first
        if not math.isfinite(loss) or loss > 2 * first:  # diverging: it will not come back in time
            return None
        for group in opt.param_groups:  # linear warmup over the first `warm` updates (Goyal et al., 2017)
            group["lr"] = lr * min(1.0, (update + 1) / (warm + 1))
        for _ in range(k):
            idx = torch.randint(0, problem.x.shape[0], (b,), generator=g)
            (_loss(model, problem.x[idx], problem.y[idx]) / k).backward()
        opt.step()
        opt.zero_grad()
    return None


@dataclass(frozen=True)
class SweepRecord:
    """Steps to the target for each effective batch (K at fixed b) and learning rate, per optimizer.

    `steps[(optimizer, B, lr)]` is the median over seeds (None: not reached)."""

    micro_batch_size: int
    effective_batches: tuple[int, ...]
    learning_rates: dict[str, tuple[float, ...]]
    target_loss: float
    steps: dict[tuple[str, int, float], int | None] = field(repr=False)

    def best(self, optimizer: str) -> dict[int, tuple[float, int] | None]:
        """B -> (learning rate, steps) of the fastest run that reached the target."""
        out = {}
        for B in self.effective_batches:
            reached = [(s, lr) for lr in self.learning_rates[optimizer]
                       if (s := self.steps.get((optimizer, B, lr))) is not None]
            out[B] = (min(reached)[1], min(reached)[0]) if reached else None
        return out


def sweep_effective_batch(
    problem: Problem, micro_batch_size: int, accumulation_steps: Sequence[int],
    learning_rates: dict[str, Sequence[float]], target_loss: float, max_updates: int = 400,
    seeds: Iterable[int] = (0,), progress: Callable | None = None,
) -> SweepRecord:
    """Run `steps_to_target` for every K (effective batch K*b), learning rate and optimizer."""
    b = check_int("micro_batch_size", micro_batch_size, 1)
    ks = [check_int("accumulation_steps", k, 1) for k in accumulation_steps]
    if not ks:
        raise ValueError("accumulation_steps must hold at least one K")
    for name in learning_rates:
        _optimizer(name, [torch.zeros(1, requires_grad=True)], 1.0)  # checks the name
    seeds = tuple(seeds)
    jobs = [(o, k, lr) for o, lrs in learning_rates.items() for k in ks for lr in lrs]
    # every run may last max_updates: the sweep's time is the sum of theirs
    updates = check_int("max_updates", max_updates, 1)
    seconds = sum(training_estimate(_examples(problem), b, k, updates)[1] for _, k, _ in jobs) * len(seeds)
    check_time(f"sweep_effective_batch of {len(jobs) * len(seeds)} runs of up to {updates} updates", seconds)
    steps = {}
    for o, k, lr in (progress or (lambda r: r))(jobs):
        runs = [steps_to_target(problem, b, k, lr, target_loss, o, max_updates, seed=s) for s in seeds]
        done = sorted(r for r in runs if r is not None)
        steps[(o, k * b, lr)] = done[len(done) // 2] if len(done) * 2 > len(runs) else None
    return SweepRecord(b, tuple(k * b for k in ks), {o: tuple(v) for o, v in learning_rates.items()},
                       target_loss, steps)


@dataclass(frozen=True)
class Tradeoff:
    """The fitted S = S_min (1 + B_crit / B); E = B S = E_min (1 + B / B_crit); B_crit = E_min / S_min."""

    s_min: float
    e_min: float

    @property
    def b_crit(self) -> float:
        return self.e_min / self.s_min

    def steps(self, effective_batch: float) -> float:
        return self.s_min + self.e_min / check_float("effective_batch", effective_batch, 0.0, math.inf)

    def examples(self, effective_batch: float) -> float:
        return effective_batch * self.steps(effective_batch)


def fit_tradeoff(effective_batches: Sequence[float], steps: Sequence[float]) -> Tradeoff:
    """Least-squares fit of S = S_min + E_min / B (linear in 1/B) to measured (B, S) pairs."""
    if len(effective_batches) != len(steps) or len(steps) < 2:
        raise ValueError(f"effective_batches and steps must be two lists of the same length >= 2, "
                         f"got {len(effective_batches)} and {len(steps)}")
    xs = torch.tensor([1 / check_float("effective_batches", B, 0.0, math.inf) for B in effective_batches],
                      dtype=torch.float64)
    ys = torch.tensor([check_float("steps", s, 0.0, math.inf) for s in steps], dtype=torch.float64)
    design = torch.stack([torch.ones_like(xs), xs], 1)
    s_min, e_min = torch.linalg.lstsq(design, ys.unsqueeze(1)).solution.squeeze(1).tolist()
    if s_min <= 0 or e_min <= 0:
        raise ValueError(f"the points do not follow S = S_min + E_min / B (fit gave S_min = {s_min:.3g}, "
                         f"E_min = {e_min:.3g}); measure a wider range of effective batches")
    return Tradeoff(s_min, e_min)


def same_update_any_split(problem: Problem, effective_batch_size: int, micro_batch_sizes: Sequence[int],
                          learning_rate: float = 0.5, num_updates: int = 5) -> dict[int, torch.Tensor]:
    """Train num_updates SGD updates on the same K*b examples per update, split as b x K for each b
    in `micro_batch_sizes`; returns b -> final flat weights (they agree to float32 rounding)."""
    n = check_int("effective_batch_size", effective_batch_size, 1)
    sizes = [check_int("micro_batch_sizes", b, 1, n) for b in micro_batch_sizes]
    for b in sizes:
        if n % b:
            raise ValueError(f"micro_batch_sizes: {b} does not divide effective_batch_size = {n}")
    updates = check_int("num_updates", num_updates, 1)
    check_time(f"same_update_any_split(effective_batch_size={n}, micro_batch_sizes={sizes}, num_updates={updates})",
               sum(training_estimate(0, b, n // b, updates)[1] for b in sizes))  # no full-data loss here
    out = {}
    for b in sizes:
        k = n // b
        model = make_classifier(0)
        opt = torch.optim.SGD(model.parameters(), lr=learning_rate)
        for u in range(updates):
            batch = slice(u * n, (u + 1) * n)
            x, y = problem.x[batch], problem.y[batch]
            for i in range(k):
                (_loss(model, x[i * b:(i + 1) * b], y[i * b:(i + 1) * b]) / k).backward()
            opt.step()
            opt.zero_grad()
        out[b] = flat_weights(model)
    return out
