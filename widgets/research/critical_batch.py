"""A small real problem trained with accumulation, B_simple read off every window, and the
critical batch size measured the way McCandlish et al. (2018) measure it, over many seeds.

- `train_with_noise_scale`: the ordinary accumulation loop; after each micro-step the new part of
  the `.grad` pile, times K, is that micro-batch's mean gradient, so every update hands
  `estimate_noise_scale` one window for free.
- `steps_to_target`: one run of accumulated training until the full-data loss reaches a target;
  `race_to_target`: the same loop for many runs at once (weights stacked, runs never mix), so a
  grid of learning rates x seeds x problems costs about one run per K.
- `sweep_effective_batch`: steps to the target as K grows at a fixed b, for every problem, seed and
  learning rate; `fit_tradeoff` fits (S/S_min - 1)(E/E_min - 1) = 1, i.e. S = S_min + E_min / B,
  and B_crit = E_min / S_min.
- `noise_scales_at`: B_simple and the Hessian-weighted B_noise, exactly, from every example's
  gradient and the closed-form Hessian; `malladi_rule`: Adam's square-root scaling rule.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Iterable, Sequence

import torch

from widgets.core.accumulation import flat_weights
from widgets.core.budget import FLOAT32, check_memory, check_time
from widgets.core.config import check_float, check_int
from widgets.research.noise_scale import ExactNoise, estimate_noise_scale, exact_noise_scales, smoothed_b_simple

INPUTS, CLASSES, HIDDEN = 8, 4, 32
OPTIMIZERS = ("sgd", "adam")
# High estimates for the budget checks: a micro-step of this MLP costs 0.3-1 ms on an idle CPU thread
# and up to 3.5 ms on a busy shared one (measured), plus about 0.7 us per example forward and backward;
# a race's full-data loss (no graph, all runs in one batched product) about 0.5 us per example and run.
MICRO_STEP_S, EXAMPLE_S, RACE_LOSS_S = 2e-3, 2e-6, 1e-6
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


def _check_optimizer(name: object) -> str:
    if name not in OPTIMIZERS:
        raise ValueError(f"optimizer must be one of {OPTIMIZERS}, got {name!r}")
    return name


def _optimizer(name: str, params, lr: float) -> torch.optim.Optimizer:
    _check_optimizer(name)
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


def _train_to_target(
    problem: Problem, micro_batch_size: int, accumulation_steps: int, learning_rate: float, target_loss: float,
    optimizer: str, max_updates: int, warmup_updates: int, seed: int,
) -> tuple[int | None, torch.nn.Module]:
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
            return update, model
        first = loss if first is None else first
        if not math.isfinite(loss) or loss > 2 * first:  # diverging: it will not come back in time
            return None, model
        for group in opt.param_groups:  # linear warmup over the first `warm` updates (Goyal et al., 2017)
            group["lr"] = lr * min(1.0, (update + 1) / (warm + 1))
        for _ in range(k):
            idx = torch.randint(0, problem.x.shape[0], (b,), generator=g)
            (_loss(model, problem.x[idx], problem.y[idx]) / k).backward()
        opt.step()
        opt.zero_grad()
    return None, model


def steps_to_target(
    problem: Problem, micro_batch_size: int, accumulation_steps: int, learning_rate: float, target_loss: float,
    optimizer: str = "sgd", max_updates: int = 400, warmup_updates: int = 0, seed: int = 0,
) -> int | None:
    """Updates of accumulated training (K micro-batches of b) until the full-data loss is at or
    below `target_loss`; None if it never gets there within `max_updates` (or diverges: the loss
    not finite or above twice its start). `seed` fixes the initial weights and the batch order."""
    return _train_to_target(problem, micro_batch_size, accumulation_steps, learning_rate, target_loss, optimizer,
                            max_updates, warmup_updates, seed)[0]


def model_at_target(problem: Problem, micro_batch_size: int, accumulation_steps: int, learning_rate: float,
                    target_loss: float, seed: int = 0, max_updates: int = 400) -> torch.nn.Module:
    """The SGD run of `steps_to_target`, returned at the update where it first reaches the target."""
    steps, model = _train_to_target(problem, micro_batch_size, accumulation_steps, learning_rate, target_loss,
                                    "sgd", max_updates, 0, seed)
    if steps is None:
        raise ValueError(f"learning_rate={learning_rate} with accumulation_steps={accumulation_steps} does not reach "
                         f"target_loss={target_loss} within max_updates={max_updates}: choose a run that does")
    return model


# --- many runs at once: the same loop, every run's weights stacked along a first axis ----------

OUTCOMES = ("reached", "diverged", "slow", "stalled")


@dataclass(frozen=True)
class Run:
    """One run of a race: `problem` indexes the race's problems; `seed` fixes the initial weights
    and the batch order exactly as in `steps_to_target`; betas and eps are Adam's."""

    problem: int
    seed: int
    learning_rate: float
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8


def _stacked_weights(seeds: Sequence[int]) -> list[torch.Tensor]:
    """make_classifier(seed)'s weights for each run, as (R, in, out) matrices and (R, 1, out) biases."""
    nets = {s: make_classifier(s) for s in set(seeds)}
    layers = [(nets[s][0], nets[s][2]) for s in seeds]
    return [torch.stack([getattr(pair[i], name).detach().T if name == "weight" else getattr(pair[i], name).detach()[None]
                         for pair in layers]).requires_grad_() for i in (0, 1) for name in ("weight", "bias")]


def _race_loss(weights: list[torch.Tensor], x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Each run's mean cross-entropy on its own examples: x (R, m, 8), y (R, m) -> (R,)."""
    w1, c1, w2, c2 = weights
    logits = torch.baddbmm(c2, torch.tanh(torch.baddbmm(c1, x, w1)), w2)  # the MLP of make_classifier, R at once
    return torch.nn.functional.cross_entropy(logits.transpose(1, 2), y, reduction="none").mean(1)


def race_estimate(num_examples: int, micro_batch_size: int, accumulation_steps: int, num_updates: int,
                  num_runs: int) -> tuple[int, float]:
    """(bytes, seconds), high estimates, of a race: one micro-step serves all runs; the full-data loss
    is taken for each."""
    n, b, k, u, r = num_examples, micro_batch_size, accumulation_steps, num_updates, num_runs
    seconds = u * (k * (MICRO_STEP_S + r * b * EXAMPLE_S) + r * n * RACE_LOSS_S)
    # per run: its loss's activations and its copy of the inputs and labels, a micro-batch's graph, its draws
    return r * (n * (LOSS_BYTES + (INPUTS + 1) * FLOAT32) + b * GRAPH_BYTES + 8 * u * k * b), seconds


def race_to_target(
    problems: Sequence[Problem], micro_batch_size: int, accumulation_steps: int, runs: Sequence[Run],
    target_loss: float, optimizer: str = "sgd", max_updates: int = 120, give_up: float = 2.0,
) -> list[tuple[int | None, str]]:
    """`steps_to_target` for many runs at once, K micro-batches of b per update, no warmup.

    The R runs' weights are stacked (R, ...), so one micro-step serves them all; the runs never mix
    (the gradient of the sum of their losses is each run's own gradient), and each run draws its
    micro-batches as `steps_to_target` does for its seed. Returns (steps, outcome) per run, the
    outcome one of OUTCOMES: 'reached'; 'diverged' (loss not finite or above twice its start);
    'slow' (stopped at `give_up` x the steps of the fastest run of its problem and seed);
    'stalled' (still short of the target after `max_updates`)."""
    if isinstance(problems, Problem):
        problems = [problems]
    n = _examples(problems[0]) if problems else 0
    if not problems or any(_examples(p) != n for p in problems):
        raise ValueError("problems must be one or more Problems with the same number of examples")
    b = check_int("micro_batch_size", micro_batch_size, 1, n)
    k = check_int("accumulation_steps", accumulation_steps, 1, 1024)
    target = check_float("target_loss", target_loss, 0.0, math.inf)
    updates = check_int("max_updates", max_updates, 1, 100_000)
    patience = check_float("give_up", give_up, 1.0, math.inf, low_inclusive=True)
    _check_optimizer(optimizer)
    if not runs or not all(isinstance(r, Run) and 0 <= r.problem < len(problems) for r in runs):
        raise ValueError(f"runs must be one or more Run, each with problem in [0, {len(problems) - 1}]")
    for r in runs:
        check_float("learning_rate", r.learning_rate, 0.0, 1e3)
        check_float("eps", r.eps, 0.0, 1.0)
        check_int("seed", r.seed, 0, 2**31 - 2)
        if len(r.betas) != 2 or not all(isinstance(beta, (int, float)) and 0 <= beta < 1 for beta in r.betas):
            raise ValueError(f"betas must be two numbers in [0, 1), got {r.betas!r}")
    memory, seconds = race_estimate(n, b, k, updates, len(runs))
    what = f"race_to_target of {len(runs)} runs (accumulation_steps={k}, max_updates={updates}) on {n} examples"
    check_memory(what, memory)
    check_time(what, seconds)
    groups = sorted({(r.problem, r.seed) for r in runs})
    group = torch.tensor([groups.index((r.problem, r.seed)) for r in runs])
    which = torch.tensor([r.problem for r in runs])
    x_all, y_all = torch.stack([p.x for p in problems]), torch.stack([p.y for p in problems])
    # each (problem, seed) draws its micro-batches as steps_to_target's generator does, all at once
    draws = torch.stack([torch.randint(0, n, (updates * k, b), generator=torch.Generator().manual_seed(s + 1))
                         for _, s in groups])
    weights = _stacked_weights([r.seed for r in runs])
    lr = torch.tensor([r.learning_rate for r in runs]).view(-1, 1, 1)
    beta1, beta2 = (torch.tensor([r.betas[i] for r in runs], dtype=torch.float64).view(-1, 1, 1) for i in (0, 1))
    eps = torch.tensor([r.eps for r in runs]).view(-1, 1, 1)
    moments = [(torch.zeros_like(w), torch.zeros_like(w)) for w in weights]
    steps, outcome = [None] * len(runs), ["stalled"] * len(runs)
    going, first, fastest = torch.ones(len(runs), dtype=torch.bool), None, {}
    for update in range(updates):
        with torch.no_grad():  # the full-data loss of every run still going
            live = going.nonzero().flatten()
            loss = torch.full((len(runs),), math.nan)
            loss[live] = _race_loss([w[live] for w in weights], x_all[which[live]], y_all[which[live]])
        first = loss.clone() if first is None else first
        for i in live.tolist():
            if loss[i] <= target:
                steps[i], outcome[i] = update, "reached"
                fastest.setdefault(int(group[i]), update)
            elif not math.isfinite(loss[i]) or loss[i] > 2 * first[i]:
                outcome[i] = "diverged"
            elif int(group[i]) in fastest and update >= patience * fastest[int(group[i])]:
                outcome[i] = "slow"
            else:
                continue
            going[i] = False
        if not going.any():
            break
        for micro_step in range(k):
            idx = draws[group, update * k + micro_step]  # (R, b): each run's own micro-batch
            x, y = x_all[which.unsqueeze(1), idx], y_all[which.unsqueeze(1), idx]
            (_race_loss(weights, x, y).sum() / k).backward()  # adds into .grad: the accumulation, run by run
        with torch.no_grad():
            keep = going.view(-1, 1, 1)  # runs that stopped keep their weights
            for w, (m, v) in zip(weights, moments):
                if optimizer == "sgd":
                    w -= keep * lr * w.grad
                else:  # Adam, as torch.optim.Adam computes it, with each run's own betas and eps
                    m.mul_(beta1).add_((1 - beta1) * w.grad)
                    v.mul_(beta2).add_((1 - beta2) * w.grad**2)
                    t = update + 1
                    denom = v.sqrt() / (1 - beta2**t).sqrt() + eps
                    w -= keep * (lr / (1 - beta1**t)) * m / denom
                w.grad = None
    return list(zip(steps, outcome))


@dataclass(frozen=True)
class SweepRecord:
    """Steps to the target for each problem, seed, effective batch (K at fixed b) and learning rate.

    `runs[(problem seed, seed, B, lr)]` is (steps or None, outcome), as `race_to_target` returns."""

    micro_batch_size: int
    effective_batches: tuple[int, ...]
    learning_rates: tuple[float, ...]
    target_loss: float
    problems: tuple[int, ...]
    seeds: tuple[int, ...]
    optimizer: str
    runs: dict[tuple[int, int, int, float], tuple[int | None, str]] = field(repr=False)

    @property
    def replicates(self) -> list[tuple[int, int]]:
        return [(p, s) for p in self.problems for s in self.seeds]

    def best(self, problem: int, seed: int) -> dict[int, tuple[float, int] | None]:
        """B -> (learning rate, steps) of the fastest run of this replicate that reached the target
        (ties: the smaller learning rate)."""
        out = {}
        for B in self.effective_batches:
            reached = [(s, lr) for lr in self.learning_rates if (s := self.runs[(problem, seed, B, lr)][0]) is not None]
            out[B] = (min(reached)[1], min(reached)[0]) if reached else None
        return out

    def tied_best(self, problem: int, seed: int, B: int) -> list[float]:
        """Every learning rate that reached the target in the fewest steps, for one (replicate, B)."""
        reached = {lr: s for lr in self.learning_rates if (s := self.runs[(problem, seed, B, lr)][0]) is not None}
        return [lr for lr, s in reached.items() if s == min(reached.values())] if reached else []

    def best_at_edge(self) -> list[tuple[int, int, int]]:
        """(problem, seed, B) whose best learning rate (or one tied for best) is the grid's first or
        last, or that never reached the target: there the grid may not hold the optimum."""
        edges = {self.learning_rates[0], self.learning_rates[-1]}
        return [(p, s, B) for p, s in self.replicates for B in self.effective_batches
                if not self.tied_best(p, s, B) or edges & set(self.tied_best(p, s, B))]

    def smallest_diverging(self, problem: int, seed: int, B: int) -> float | None:
        """The smallest learning rate on the grid that diverged at B for this replicate (None: none did):
        the stability limit, as far as the grid resolves it."""
        diverged = [lr for lr in self.learning_rates if self.runs[(problem, seed, B, lr)][1] == "diverged"]
        return min(diverged) if diverged else None

    def linear_rule(self, problem: int, seed: int) -> dict[int, tuple[float, int | None, str]]:
        """B -> (learning rate, steps, outcome) of the linear scaling rule lr(B) = lr*(B0) B / B0 from
        this replicate's best learning rate at the smallest batch B0, read off the grid (a rate off
        the grid gets outcome 'off the grid')."""
        B0 = self.effective_batches[0]
        lr0 = self.best(problem, seed)[B0][0]
        out = {}
        for B in self.effective_batches:
            lr = lr0 * B / B0
            on_grid = [g for g in self.learning_rates if math.isclose(g, lr, rel_tol=1e-9)]
            out[B] = (lr, *self.runs[(problem, seed, B, on_grid[0])]) if on_grid else (lr, None, "off the grid")
        return out


def malladi_rule(k: float, learning_rate: float, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8) -> tuple[float, tuple[float, float], float]:
    """Adam's settings for a batch k times larger by the square-root rule of Malladi et al. (2022):
    lr x sqrt(k), 1 - beta1 and 1 - beta2 x k, eps / sqrt(k). Defined while k (1 - beta) < 1."""
    k = check_float("k", k, 0.0, math.inf)
    b1, b2 = (check_float("betas", b, 0.0, 1.0, low_inclusive=True) for b in betas)
    if k * (1 - min(b1, b2)) >= 1:
        raise ValueError(f"k must be below 1 / (1 - beta) = {1 / (1 - min(b1, b2)):g} for betas={betas}, got {k:g}: "
                         "past it the rule asks for a beta at or below 0")
    return (check_float("learning_rate", learning_rate, 0.0, math.inf) * math.sqrt(k),
            (1 - k * (1 - b1), 1 - k * (1 - b2)), check_float("eps", eps, 0.0, math.inf) / math.sqrt(k))


def sweep_effective_batch(
    problems: Problem | Sequence[Problem], micro_batch_size: int, accumulation_steps: Sequence[int],
    learning_rates: dict[str, Sequence[float]], target_loss: float, max_updates: int = 120,
    seeds: Iterable[int] = (0,), give_up: float = 2.0, progress: Callable | None = None,
) -> SweepRecord:
    """Every problem x seed x K x learning rate of one optimizer ({name: grid}), one race per K."""
    problems = [problems] if isinstance(problems, Problem) else list(problems)
    for p in problems:
        _examples(p)
    b = check_int("micro_batch_size", micro_batch_size, 1)
    ks = [check_int("accumulation_steps", k, 1) for k in accumulation_steps]
    if not ks:
        raise ValueError("accumulation_steps must hold at least one K")
    if len(learning_rates) != 1:
        raise ValueError(f"learning_rates must map one optimizer to its grid, got {list(learning_rates)}")
    (name, grid), = learning_rates.items()
    _check_optimizer(name)
    grid = tuple(sorted(check_float("learning_rates", lr, 0.0, 1e3) for lr in grid))
    seeds = tuple(check_int("seeds", s, 0, 2**31 - 2) for s in seeds)
    runs = [Run(i, s, lr) for i in range(len(problems)) for s in seeds for lr in grid]
    updates = check_int("max_updates", max_updates, 1)
    # every race may last max_updates: the sweep's time is the sum of theirs
    n = _examples(problems[0]) if problems else 0
    seconds = sum(race_estimate(n, b, k, updates, len(runs))[1] for k in ks)
    check_time(f"sweep_effective_batch of {len(runs) * len(ks)} runs of up to {updates} updates", seconds)
    results = {}
    for k in (progress or (lambda r: r))(ks):
        for run, result in zip(runs, race_to_target(problems, b, k, runs, target_loss, name, updates, give_up)):
            results[(problems[run.problem].seed, run.seed, k * b, run.learning_rate)] = result
    return SweepRecord(b, tuple(k * b for k in ks), grid, target_loss, tuple(p.seed for p in problems), seeds, name,
                       results)


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


def per_example_gradients(problem: Problem, model: torch.nn.Module) -> torch.Tensor:
    """Every example's gradient of its own loss, (n, P) in float64, in `model.parameters()` order:
    backpropagation through make_classifier's two layers written out (tests check it against autograd)."""
    n = _examples(problem)
    if not isinstance(model, torch.nn.Sequential) or len(model) != 3:
        raise TypeError(f"model must be an MLP from make_classifier, got {type(model).__name__}")
    w1, c1, w2, c2 = (p.detach().double() for p in model.parameters())
    x = problem.x.double()
    check_memory(f"per_example_gradients on {n} examples", 8 * n * (2 * sum(p.numel() for p in model.parameters())
                                                                  + 4 * HIDDEN))
    h = torch.tanh(x @ w1.T + c1)                                                   # (n, 32)
    d_logits = torch.softmax(h @ w2.T + c2, 1) - torch.nn.functional.one_hot(problem.y, CLASSES)  # (n, 4)
    d_hidden = (d_logits @ w2) * (1 - h * h)                                        # (n, 32): through tanh
    return torch.cat([torch.einsum("nh,ni->nhi", d_hidden, x).flatten(1), d_hidden,
                      torch.einsum("nc,nh->nch", d_logits, h).flatten(1), d_logits], 1)


def classifier_hessian(problem: Problem, model: torch.nn.Module) -> torch.Tensor:
    """The Hessian of the mean cross-entropy over all of `problem` at `model`'s weights, (P, P) in
    float64 and `model.parameters()` order, in closed form (tests check it against autograd):
    the Gauss-Newton part J^T (diag(p) - p p^T) J plus the residual (p - onehot) times each logit's
    own second derivative, which for z = W2 tanh(W1 x + c1) + c2 pairs W2 with layer one and layer
    one with itself through tanh'' = -2 tanh tanh'."""
    n = _examples(problem)
    if not isinstance(model, torch.nn.Sequential) or len(model) != 3:
        raise TypeError(f"model must be an MLP from make_classifier, got {type(model).__name__}")
    w1, c1, w2, c2 = (p.detach().double() for p in model.parameters())
    hid, inp, out = HIDDEN, INPUTS, CLASSES
    size = hid * (inp + 1) + out * (hid + 1)
    # float64: the Jacobians (n, 4, P), a few (n, 32) and the (P, P) blocks
    check_memory(f"classifier_hessian on {n} examples", 8 * (3 * n * out * size + 8 * n * hid + 4 * size * size))
    x1 = torch.cat([problem.x.double(), torch.ones(n, 1, dtype=torch.float64)], 1)      # (n, 9): inputs and 1
    h = torch.tanh(x1[:, :inp] @ w1.T + c1)
    h1 = torch.cat([h, torch.ones(n, 1, dtype=torch.float64)], 1)                        # (n, 33): hidden and 1
    prob = torch.softmax(h @ w2.T + c2, 1)
    resid = prob - torch.nn.functional.one_hot(problem.y, out)                           # (n, 4)
    dh, ddh = 1 - h * h, -2 * h * (1 - h * h)                                             # tanh', tanh''
    # layout here: layer one as (unit j, input m or bias), layer two as (class k, unit j or bias)
    j_one = torch.einsum("kj,nj,nm->nkjm", w2, dh, x1).reshape(n, out, -1)               # dz_k / d(W1, c1)
    j_two = torch.einsum("kc,nj->nkcj", torch.eye(out, dtype=torch.float64), h1).reshape(n, out, -1)
    jac = torch.cat([j_one, j_two], 2)                                                    # (n, 4, P)
    a_jac = prob.unsqueeze(2) * jac - prob.unsqueeze(2) * (prob.unsqueeze(1) @ jac)       # (diag(p) - p p^T) J
    hess = torch.einsum("nkp,nkq->pq", jac, a_jac) / n                                    # Gauss-Newton
    one = hid * (inp + 1)
    through = torch.einsum("nj,nm,nq->jmq", (resid @ w2) * ddh, x1, x1) / n              # layer one, same unit
    hess[:one, :one] += torch.block_diag(*through)
    cross = torch.einsum("nk,nj,nm->kjm", resid, dh, x1) / n                             # W2[k, j] with unit j
    block = torch.zeros(out, hid + 1, hid, inp + 1, dtype=torch.float64)
    block[:, torch.arange(hid), torch.arange(hid)] = cross
    hess[one:, :one] += block.reshape(out * (hid + 1), one)
    hess[:one, one:] += block.reshape(out * (hid + 1), one).T
    # back to parameters() order: W1 (j, m), c1 (j), W2 (k, j), c2 (k)
    idx_one = torch.arange(one).view(hid, inp + 1)
    idx_two = one + torch.arange(out * (hid + 1)).view(out, hid + 1)
    order = torch.cat([idx_one[:, :inp].flatten(), idx_one[:, inp], idx_two[:, :hid].flatten(), idx_two[:, hid]])
    return hess[order][:, order]


def noise_scales_at(problem: Problem, model: torch.nn.Module) -> ExactNoise:
    """B_simple and B_noise of `problem` at `model`'s weights, exactly (float64): every example's
    gradient and the full P x P Hessian of the mean loss, both in closed form."""
    return exact_noise_scales(per_example_gradients(problem, model), classifier_hessian(problem, model))
