"""A small real problem trained with accumulation, B_simple read off every window, and the critical batch of
McCandlish et al.'s (2018) trade-off (S/S_min - 1)(E/E_min - 1) = 1."""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Callable, Sequence

import torch

from widgets.core.accumulation import flat_weights
from widgets.core.config import FLOAT32, check_float, check_int, check_memory, check_time
from widgets.core.loops import train
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
    """(bytes, seconds), high estimates, of `num_updates` updates of K micro-batches of b on n examples."""
    n, b, k = num_examples, micro_batch_size, accumulation_steps
    seconds = num_updates * (k * (MICRO_STEP_S + b * EXAMPLE_S) + n * EXAMPLE_S)
    return n * LOSS_BYTES + b * GRAPH_BYTES, seconds


def problem_size(problem: object) -> int:
    """The examples of a TeacherProblem; a TypeError naming `problem` for anything else."""
    if not isinstance(problem, TeacherProblem):
        raise TypeError(f"problem must be a TeacherProblem (from make_teacher_problem), got {type(problem).__name__}")
    return problem.x.shape[0]


@dataclass(frozen=True)
class TeacherProblem:
    """A 4-class problem in 8 dimensions labelled by a random teacher network, 10 % labels flipped."""

    x: torch.Tensor        # (n, 8) float32
    y: torch.Tensor        # (n,) int64
    seed: int


def make_teacher_problem(num_examples: int = 4096, seed: int = 0) -> TeacherProblem:
    """The classification problem of notebook researcher_3, fixed by `seed`."""
    n = check_int("num_examples", num_examples, 16, 1_000_000)
    seed = check_int("seed", seed, 0, 2**31 - 1)
    # float32 x (n, 8), the teacher's two (n, 16) hiddens and (n, 4) scores; int64 labels, draws and result; the flips
    check_memory(f"make_teacher_problem(num_examples={n})", n * ((INPUTS + 2 * 16 + CLASSES) * FLOAT32 + 3 * 8 + 1))
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, INPUTS, generator=g)
    teacher = torch.randn(INPUTS, 16, generator=g), torch.randn(16, CLASSES, generator=g)
    y = (torch.tanh(x @ teacher[0]) @ teacher[1]).argmax(1)
    flip = torch.rand(n, generator=g) < 0.1  # label noise: the loss cannot reach zero
    y = torch.where(flip, torch.randint(0, CLASSES, (n,), generator=g), y)
    return TeacherProblem(x, y, seed)


def make_classifier(seed: int = 0) -> torch.nn.Module:
    """An MLP 8 -> 32 -> 4 (tanh) with weights fixed by `seed`."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return torch.nn.Sequential(torch.nn.Linear(INPUTS, HIDDEN), torch.nn.Tanh(), torch.nn.Linear(HIDDEN, CLASSES))


def _loss(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.cross_entropy(model(x), y)  # a mean over the examples


@dataclass(frozen=True)
class NoiseRecord:
    """Per update: the full-data loss before it, the window's |G|^2, tr(Sigma), B_simple and its EMA (examples)."""

    losses: list[float]
    grad_sq: list[float]
    trace_sigma: list[float]
    per_window: list[float]
    smoothed: list[float]


def train_with_noise_scale(
    problem: TeacherProblem, micro_batch_size: int = 8, accumulation_steps: int = 8, num_updates: int = 300,
    learning_rate: float = 0.5, ema_decay: float = 0.95, progress: Callable | None = None,
) -> NoiseRecord:
    """SGD with accumulation on `problem`, reading B_simple from every accumulation window."""
    n = problem_size(problem)
    b = check_int("micro_batch_size", micro_batch_size, 1, n)
    k = check_int("accumulation_steps", accumulation_steps, 2, 1024)
    n_updates = check_int("num_updates", num_updates, 1, 100_000)
    lr = check_float("learning_rate", learning_rate, 0.0, 100.0)
    what = (f"train_with_noise_scale(micro_batch_size={b}, accumulation_steps={k}, num_updates={n_updates}) "
            f"on {n} examples")
    memory, seconds = training_estimate(n, b, k, n_updates)
    check_memory(what, memory)
    check_time(what, seconds)
    model = make_classifier(0)
    params = list(model.parameters())
    opt = torch.optim.SGD(params, lr=lr)
    g = torch.Generator().manual_seed(1)  # the draws of a race's run with seed 0
    losses, grad_sq, trace, per_window = [], [], [], []
    for _ in (progress or (lambda r: r))(range(n_updates)):
        with torch.no_grad():
            losses.append(float(_loss(model, problem.x, problem.y)))
        micro = torch.empty(k, sum(p.numel() for p in params))
        pile = torch.zeros_like(micro[0])
        for i in range(k):
            idx = torch.randint(0, n, (b,), generator=g)  # i.i.d. draws, as the theory assumes
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
    return NoiseRecord(losses, grad_sq, trace, per_window, smoothed_b_simple(grad_sq, trace, ema_decay))


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
    xs = [1 / check_float("effective_batches", B, 0.0, math.inf) for B in effective_batches]
    e_min, s_min = statistics.linear_regression(xs, [check_float("steps", s, 0.0, math.inf) for s in steps])
    if s_min <= 0 or e_min <= 0:
        raise ValueError(f"the points do not follow S = S_min + E_min / B (fit gave S_min = {s_min:.3g}, "
                         f"E_min = {e_min:.3g}); measure a wider range of effective batches")
    return Tradeoff(s_min, e_min)


def leave_one_out(effective_batches: Sequence[float], steps: Sequence[float]) -> tuple[float, float]:
    """(lowest, highest) B_crit of the fits that each leave one measured batch out (failed fits skipped)."""
    fits = []
    for i in range(len(steps)):
        try:
            fits.append(fit_tradeoff([B for j, B in enumerate(effective_batches) if j != i],
                                     [S for j, S in enumerate(steps) if j != i]).b_crit)
        except ValueError:
            continue
    if not fits:
        raise ValueError("no fit survives leaving one batch out: measure more effective batches")
    return min(fits), max(fits)


def same_update_any_split(problem: TeacherProblem, effective_batch_size: int, micro_batch_sizes: Sequence[int],
                          num_updates: int = 5) -> dict[int, torch.Tensor]:
    """b -> final flat weights after SGD on the same K*b examples per update split as b x K."""
    n = check_int("effective_batch_size", effective_batch_size, 1)
    sizes = [check_int("micro_batch_sizes", b, 1, n) for b in micro_batch_sizes]
    for b in sizes:
        if n % b:
            raise ValueError(f"micro_batch_sizes: {b} does not divide effective_batch_size = {n}")
    updates = check_int("num_updates", num_updates, 1)
    check_time(f"same_update_any_split(effective_batch_size={n}, micro_batch_sizes={sizes}, num_updates={updates})",
               sum(training_estimate(0, b, n // b, updates)[1] for b in sizes))  # no full-data loss here
    out = {}
    x, y = problem.x[:updates * n], problem.y[:updates * n]
    for b in sizes:  # the lab's loop, `train`: each update's K = n / b micro-batches weighted b / n
        model = make_classifier(0)
        train(model, torch.optim.SGD(model.parameters(), lr=0.5), torch.nn.functional.cross_entropy,
              zip(x.split(b), y.split(b)), n // b, max_norm=None)
        out[b] = flat_weights(model)
    return out


def noise_scales_at(problem: TeacherProblem, model: torch.nn.Module) -> ExactNoise:
    """B_simple and B_noise of `problem` at `model`'s weights, exactly: every example's gradient and the Hessian."""
    n = problem_size(problem)
    if not isinstance(model, torch.nn.Sequential) or len(model) != 3:
        raise TypeError(f"model must be an MLP from make_classifier, got {type(model).__name__}")
    shapes = [p.shape for p in model.parameters()]
    size = sum(s.numel() for s in shapes)
    # float64: the per-example gradients (n, P) and their graph, the Hessian (P, P) and its rows
    check_memory(f"noise_scales_at on {n} examples", 8 * (2 * n * (size + 4 * HIDDEN) + 4 * size * size))
    weights = torch.cat([p.detach().double().reshape(-1) for p in model.parameters()])
    x = problem.x.double()

    def loss(flat: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:  # make_classifier's MLP
        w1, c1, w2, c2 = (part.view(s) for part, s in zip(flat.split([s.numel() for s in shapes]), shapes))
        return torch.nn.functional.cross_entropy(torch.tanh(x @ w1.T + c1) @ w2.T + c2, y)

    per_example = torch.func.vmap(torch.func.grad(loss), in_dims=(None, 0, 0))(weights, x[:, None], problem.y[:, None])
    hessian = torch.autograd.functional.hessian(lambda flat: loss(flat, x, problem.y), weights)
    return exact_noise_scales(per_example, hessian)
