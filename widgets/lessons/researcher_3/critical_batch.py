"""A small real problem trained with accumulation, B_simple read off every window, and the critical batch.

`fit_tradeoff` fits McCandlish et al.'s (2018) (S/S_min - 1)(E/E_min - 1) = 1, i.e. S = S_min + E_min / B, and
B_crit = E_min / S_min; `noise_scales_at` gives B_simple and B_noise exactly, in closed form."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Sequence

import torch

from widgets.core.accumulation import flat_weights
from widgets.core.config import FLOAT32, check_memory, check_time
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
    """(bytes, seconds), high estimates, of `num_updates` updates of K micro-batches of b on n examples."""
    n, b, k = num_examples, micro_batch_size, accumulation_steps
    seconds = num_updates * (k * (MICRO_STEP_S + b * EXAMPLE_S) + n * EXAMPLE_S)
    return n * LOSS_BYTES + b * GRAPH_BYTES, seconds


def problem_size(problem: object) -> int:
    """The examples of a TeacherProblem; a TypeError naming `problem` for anything else."""
    if not isinstance(problem, TeacherProblem):
        raise TypeError(f"problem must be a TeacherProblem (from make_teacher_problem), got {type(problem).__name__}")
    return problem.x.shape[0]


def _check_training(what: str, num_examples: int, micro_batch_size: int, accumulation_steps: int,
                    num_updates: int) -> None:
    memory, seconds = training_estimate(num_examples, micro_batch_size, accumulation_steps, num_updates)
    check_memory(what, memory)
    check_time(what, seconds)


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
    check_int("seed", seed, 0, 2**31 - 1)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return torch.nn.Sequential(torch.nn.Linear(INPUTS, HIDDEN), torch.nn.Tanh(), torch.nn.Linear(HIDDEN, CLASSES))


def _loss(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.cross_entropy(model(x), y)  # a mean over the examples


def check_optimizer(name: object) -> str:
    """`name` if it is one of OPTIMIZERS; a ValueError naming `optimizer` and the choices otherwise."""
    if name not in OPTIMIZERS:
        raise ValueError(f"optimizer must be one of {OPTIMIZERS}, got {name!r}")
    return name


@dataclass(frozen=True)
class NoiseRecord:
    """Per update: the full-data loss before it, the window's |G|^2, tr(Sigma), B_simple and its EMA (examples)."""

    accumulation_steps: int
    micro_batch_size: int
    losses: list[float]
    grad_sq: list[float]
    trace_sigma: list[float]
    per_window: list[float]
    smoothed: list[float]


def train_with_noise_scale(
    problem: TeacherProblem, micro_batch_size: int = 8, accumulation_steps: int = 8, num_updates: int = 300,
    learning_rate: float = 0.5, ema_decay: float = 0.95, seed: int = 0, progress: Callable | None = None,
) -> NoiseRecord:
    """SGD with accumulation on `problem`, reading B_simple from every accumulation window."""
    if not isinstance(problem, TeacherProblem):
        raise TypeError(f"problem must be a TeacherProblem (from make_teacher_problem), got {type(problem).__name__}")
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
                          learning_rate: float = 0.5, num_updates: int = 5) -> dict[int, torch.Tensor]:
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


def per_example_gradients(problem: TeacherProblem, model: torch.nn.Module) -> torch.Tensor:
    """Every example's gradient, (n, P) float64 in `model.parameters()` order, backpropagation written out."""
    n = problem.x.shape[0]  # checked by noise_scales_at
    w1, c1, w2, c2 = (p.detach().double() for p in model.parameters())
    x = problem.x.double()
    check_memory(f"per_example_gradients on {n} examples", 8 * n * (2 * sum(p.numel() for p in model.parameters())
                                                                  + 4 * HIDDEN))
    h = torch.tanh(x @ w1.T + c1)                                                   # (n, 32)
    d_logits = torch.softmax(h @ w2.T + c2, 1) - torch.nn.functional.one_hot(problem.y, CLASSES)  # (n, 4)
    d_hidden = (d_logits @ w2) * (1 - h * h)                                        # (n, 32): through tanh
    return torch.cat([torch.einsum("nh,ni->nhi", d_hidden, x).flatten(1), d_hidden,
                      torch.einsum("nc,nh->nch", d_logits, h).flatten(1), d_logits], 1)


def classifier_hessian(problem: TeacherProblem, model: torch.nn.Module) -> torch.Tensor:
    """The Hessian of the mean cross-entropy at `model`'s weights, (P, P) float64, in closed form.

    Gauss-Newton J^T (diag(p) - p p^T) J plus the residual (p - onehot) times each logit's second derivative
    (through tanh'' = -2 tanh tanh')."""
    n = problem.x.shape[0]  # checked by noise_scales_at
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


def noise_scales_at(problem: TeacherProblem, model: torch.nn.Module) -> ExactNoise:
    """B_simple and B_noise of `problem` at `model`'s weights, exactly (float64, closed form)."""
    problem_size(problem)
    if not isinstance(model, torch.nn.Sequential) or len(model) != 3:
        raise TypeError(f"model must be an MLP from make_classifier, got {type(model).__name__}")
    return exact_noise_scales(per_example_gradients(problem, model), classifier_hessian(problem, model))
