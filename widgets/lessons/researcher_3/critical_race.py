"""researcher_3's runs to a target loss, many at once, and the sweep that measures the critical batch with them."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Iterable, Sequence

import torch

from widgets.core.config import FLOAT32, check_float, check_int, check_memory, check_time
from widgets.lessons.researcher_3.critical_batch import (
    EXAMPLE_S, GRAPH_BYTES, INPUTS, LOSS_BYTES, MICRO_STEP_S, OPTIMIZERS, RACE_LOSS_S, TeacherProblem,
    make_classifier, problem_size,
)

GIVE_UP = 2.0  # a run is 'slow' once it has taken twice its replicate's fastest run to the target


@dataclass(frozen=True)
class Run:
    """One run of a race: its problem's index, the seed of its weights and draws, and its optimizer's settings."""

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
    """(bytes, seconds), high estimates, of a race: one micro-step serves every run."""
    n, b, k, u, r = num_examples, micro_batch_size, accumulation_steps, num_updates, num_runs
    seconds = u * (k * (MICRO_STEP_S + r * b * EXAMPLE_S) + r * n * RACE_LOSS_S)
    # per run: its loss's activations and its copy of the inputs and labels, a micro-batch's graph, its draws
    return r * (n * (LOSS_BYTES + (INPUTS + 1) * FLOAT32) + b * GRAPH_BYTES + 8 * u * k * b), seconds


def race_to_target(
    problems: Sequence[TeacherProblem], micro_batch_size: int, accumulation_steps: int, runs: Sequence[Run],
    target_loss: float, optimizer: str = "sgd", max_updates: int = 120,
) -> list[tuple[float | None, str]]:
    """Accumulated training (K micro-batches of b) of every run at once, stacked, until the loss reaches `target_loss`.

    Per run (steps, outcome): steps interpolated where the loss crosses the target (None unless 'reached'); outcome
    'reached', 'diverged' (not finite or above twice its start), 'slow' (GIVE_UP x its replicate's fastest) or
    'stalled' (short of the target after `max_updates`)."""
    return _race(problems, micro_batch_size, accumulation_steps, runs, target_loss, optimizer, max_updates)[0]


def model_at_target(problem: TeacherProblem, micro_batch_size: int, accumulation_steps: int, learning_rate: float,
                    target_loss: float, seed: int = 0, max_updates: int = 400) -> torch.nn.Module:
    """One SGD run of `race_to_target`, as a `make_classifier` model with its weights where it reached the target."""
    run = Run(0, seed, learning_rate)
    ((steps, _),), weights = _race([problem], micro_batch_size, accumulation_steps, [run], target_loss, "sgd",
                                   max_updates)
    if steps is None:
        raise ValueError(f"learning_rate={learning_rate} with accumulation_steps={accumulation_steps} does not reach "
                         f"target_loss={target_loss} within max_updates={max_updates}: choose a run that does")
    model = make_classifier(seed)
    w1, c1, w2, c2 = (w[0].detach() for w in weights)
    with torch.no_grad():  # the race keeps (in, out) matrices and (1, out) biases: back to Linear's layout
        for layer, (w, c) in zip((model[0], model[2]), ((w1, c1), (w2, c2))):
            layer.weight.copy_(w.T)
            layer.bias.copy_(c[0])
    return model


def _race(
    problems: Sequence[TeacherProblem], micro_batch_size: int, accumulation_steps: int, runs: Sequence[Run],
    target_loss: float, optimizer: str, max_updates: int,
) -> tuple[list[tuple[float | None, str]], list[torch.Tensor]]:
    """`race_to_target`'s results and the stacked weights at the end."""
    if isinstance(problems, TeacherProblem):
        problems = [problems]
    n = problem_size(problems[0]) if problems else 0
    if not problems or any(problem_size(p) != n for p in problems):
        raise ValueError("problems must be one or more TeacherProblems with the same number of examples")
    b = check_int("micro_batch_size", micro_batch_size, 1, n)
    k = check_int("accumulation_steps", accumulation_steps, 1, 1024)
    target = check_float("target_loss", target_loss, 0.0, math.inf)
    updates = check_int("max_updates", max_updates, 1, 100_000)
    if optimizer not in OPTIMIZERS:
        raise ValueError(f"optimizer must be one of {OPTIMIZERS}, got {optimizer!r}")
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
    # each (problem, seed) draws all its micro-batches from its own generator, at once
    draws = torch.stack([torch.randint(0, n, (updates * k, b), generator=torch.Generator().manual_seed(s + 1))
                         for _, s in groups])
    weights = _stacked_weights([r.seed for r in runs])
    lr = torch.tensor([r.learning_rate for r in runs]).view(-1, 1, 1)
    beta1, beta2 = (torch.tensor([r.betas[i] for r in runs], dtype=torch.float64).view(-1, 1, 1) for i in (0, 1))
    eps = torch.tensor([r.eps for r in runs]).view(-1, 1, 1)
    moments = [(torch.zeros_like(w), torch.zeros_like(w)) for w in weights]
    steps, outcome = [None] * len(runs), ["stalled"] * len(runs)
    going, first, previous, fastest = torch.ones(len(runs), dtype=torch.bool), None, None, {}
    for update in range(updates):
        with torch.no_grad():  # the full-data loss of every run still going
            live = going.nonzero().flatten()
            loss = torch.full((len(runs),), math.nan)
            loss[live] = _race_loss([w[live] for w in weights], x_all[which[live]], y_all[which[live]])
        first = loss.clone() if first is None else first
        for i in live.tolist():
            if loss[i] <= target:
                # where the loss crossed the target, between the update before (above it) and this one
                above = 0.0 if update == 0 else float((previous[i] - target) / (previous[i] - loss[i]))
                steps[i], outcome[i] = (update - 1 + above if update else 0.0), "reached"
                fastest.setdefault(int(group[i]), steps[i])
            elif not math.isfinite(loss[i]) or loss[i] > 2 * first[i]:
                outcome[i] = "diverged"
            elif int(group[i]) in fastest and update >= GIVE_UP * fastest[int(group[i])]:
                outcome[i] = "slow"
            else:
                continue
            going[i] = False
        previous = loss
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
    return list(zip(steps, outcome)), weights


@dataclass(frozen=True)
class SweepRecord:
    """`runs[(problem seed, seed, B, lr)]`: (steps or None, outcome) of every run of the sweep."""

    effective_batches: tuple[int, ...]
    learning_rates: tuple[float, ...]
    problems: tuple[int, ...]
    seeds: tuple[int, ...]
    runs: dict[tuple[int, int, int, float], tuple[int | None, str]] = field(repr=False)

    @property
    def replicates(self) -> list[tuple[int, int]]:
        return [(p, s) for p in self.problems for s in self.seeds]

    def best(self, problem: int, seed: int) -> dict[int, tuple[float, int] | None]:
        """B -> (learning rate, steps) of this replicate's fastest run to the target (ties: the smaller rate)."""
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
        """(problem, seed, B) whose best rate is at the grid's edge, or that never reached the target."""
        edges = {self.learning_rates[0], self.learning_rates[-1]}
        return [(p, s, B) for p, s in self.replicates for B in self.effective_batches
                if not self.tied_best(p, s, B) or edges & set(self.tied_best(p, s, B))]

    def smallest_diverging(self, problem: int, seed: int, B: int) -> float | None:
        """The smallest learning rate of the grid that diverged at B for this replicate, or None."""
        diverged = [lr for lr in self.learning_rates if self.runs[(problem, seed, B, lr)][1] == "diverged"]
        return min(diverged) if diverged else None

    def linear_rule(self, problem: int, seed: int) -> dict[int, tuple[float, int | None, str]]:
        """B -> (lr, steps, outcome) under linear scaling from the best rate at the smallest B ('off the grid' if it is)."""
        B0 = self.effective_batches[0]
        lr0 = self.best(problem, seed)[B0][0]
        out = {}
        for B in self.effective_batches:
            lr = lr0 * B / B0
            on_grid = [g for g in self.learning_rates if math.isclose(g, lr, rel_tol=1e-9)]
            out[B] = (lr, *self.runs[(problem, seed, B, on_grid[0])]) if on_grid else (lr, None, "off the grid")
        return out


def sweep_effective_batch(
    problems: TeacherProblem | Sequence[TeacherProblem], micro_batch_size: int, accumulation_steps: Sequence[int],
    learning_rates: dict[str, Sequence[float]], target_loss: float, max_updates: int = 120,
    seeds: Iterable[int] = (0,), progress: Callable | None = None,
) -> SweepRecord:
    """Every problem x seed x K x learning rate of one optimizer ({name: grid}), one race per K."""
    # the values are checked by each race; the sweep checks what it needs for its time estimate
    problems = [problems] if isinstance(problems, TeacherProblem) else list(problems)
    b = check_int("micro_batch_size", micro_batch_size, 1)
    ks = [check_int("accumulation_steps", k, 1) for k in accumulation_steps]
    if not ks or len(learning_rates) != 1:
        raise ValueError(f"accumulation_steps must hold at least one K and learning_rates map one optimizer to "
                         f"its grid, got {ks} and {list(learning_rates)}")
    (name, grid), = learning_rates.items()
    grid, seeds = tuple(sorted(grid)), tuple(seeds)
    runs = [Run(i, s, lr) for i in range(len(problems)) for s in seeds for lr in grid]
    updates = check_int("max_updates", max_updates, 1)
    n = problem_size(problems[0]) if problems else 0
    seconds = sum(race_estimate(n, b, k, updates, len(runs))[1] for k in ks)  # every race may last max_updates
    check_time(f"sweep_effective_batch of {len(runs) * len(ks)} runs of up to {updates} updates", seconds)
    results = {}
    for k in (progress or (lambda r: r))(ks):
        for run, result in zip(runs, race_to_target(problems, b, k, runs, target_loss, name, updates)):
            results[(problems[run.problem].seed, run.seed, k * b, run.learning_rate)] = result
    return SweepRecord(tuple(k * b for k in ks), grid, tuple(p.seed for p in problems), seeds, results)
