"""The loop auditor's instruments: the tiny problem, the watched model/optimizer/scheduler, the runs.

`widgets.audit.auditor` reads what these record. A loop is watched from outside: hooks on the model's
single weight see every backward pass (what it added to `.grad`, what `.grad` held before), the
optimizer keeps the gradient and learning rate of each `step()` and counts `zero_grad()`, the
scheduler counts its steps. Everything is float64, so ratios of the same sums agree to ~1e-12.
"""
from __future__ import annotations

import os
import traceback
import warnings
from dataclasses import dataclass, field
from typing import Callable

import torch

from widgets.core.accumulation import is_update_step
from widgets.core.training import linear_warmup

LEARNING_RATE = 0.05  # of the SGD handed to the audited loop

# ----------------------------------------------------------------------------- the problem


@dataclass(frozen=True)
class Problem:
    """The audited run's data: micro-batches of (inputs (b, 3), targets (b, 1)) and how they group."""

    batches: list[tuple[torch.Tensor, torch.Tensor]]
    groups: list[range]  # the backward passes (= batch indices) of each update
    K: int
    b: int
    clip_norm: float | None
    with_scheduler: bool


def make_problem(K: int, num_batches: int, clip_norm: float | None, with_scheduler: bool) -> Problem:
    """Linear regression, 3 features, micro-batches of b = K + 1 examples (so a loss summed over
    examples, b x too big, is never mistaken for an undivided one, K x too big)."""
    b = K + 1
    g = torch.Generator().manual_seed(0)
    x = torch.randn(num_batches * b, 3, generator=g, dtype=torch.float64)
    y = x @ torch.tensor([[1.5], [-2.0], [0.5]], dtype=torch.float64)
    y = y + 0.5 * torch.randn(y.shape, generator=g, dtype=torch.float64)
    if clip_norm is not None:
        # targets large enough that even a first micro-step's pile exceeds clip_norm, so clipping acts
        # (and shows) wherever the loop puts it; with zero starting weights the gradient scales with y
        smallest = min(float((2 / b) * (x[i : i + b].T @ y[i : i + b]).norm()) for i in range(0, len(x), b))
        y = y * max(1.0, 20 * K * clip_norm / smallest)
    batches = [(x[i : i + b], y[i : i + b]) for i in range(0, len(x), b)]
    groups = [range(s, min(s + K, num_batches)) for s in range(0, num_batches, K)]
    return Problem(batches, groups, K, b, clip_norm, with_scheduler)


def true_gradient(weight: torch.Tensor, batch) -> tuple[torch.Tensor, float]:
    """The gradient (flat, shape (3,)) and value of one micro-batch's mean squared error at `weight`."""
    w = weight.detach().clone().requires_grad_(True)
    loss = torch.nn.functional.mse_loss(batch[0] @ w.T, batch[1])
    (grad,) = torch.autograd.grad(loss, w)
    return grad.reshape(-1), loss.item()


# ----------------------------------------------------------------------------- the instruments


class Tape:
    """Everything observed during one run of a loop, in order."""

    def __init__(self, model: torch.nn.Linear):
        self.weights, self.incoming, self.before, self.after = [], [], [], []  # one per backward pass
        self.steps: list[tuple[int, torch.Tensor, float]] = []  # (backward passes so far, .grad, lr)
        self.zero_grads = 0
        self.scheduler_calls: list[int] = []  # optimizer steps so far at each scheduler.step()
        p = model.weight
        p.register_hook(lambda grad: self._on_backward(p, grad))  # runs before grad is added to .grad
        p.register_post_accumulate_grad_hook(lambda q: self.after.append(flat(q.grad)))

    def _on_backward(self, p, grad) -> None:
        self.weights.append(p.detach().clone())
        self.incoming.append(grad.detach().reshape(-1).clone())
        self.before.append(flat(p.grad))


def flat(grad: torch.Tensor | None) -> torch.Tensor | None:
    """A detached flat copy of a gradient, or None when there is none."""
    return None if grad is None else grad.detach().reshape(-1).clone()


class AuditModel(torch.nn.Linear):
    """y = x @ w.T with one weight of shape (1, 3), starting at zero; counts model.zero_grad()."""

    def __init__(self):
        super().__init__(3, 1, bias=False, dtype=torch.float64)
        self.tape = Tape(self)

    def reset_parameters(self) -> None:
        torch.nn.init.zeros_(self.weight)  # no random init: the global random state stays untouched

    def zero_grad(self, set_to_none: bool = True) -> None:
        self.tape.zero_grads += 1
        super().zero_grad(set_to_none)


class AuditSGD(torch.optim.SGD):
    """Plain SGD that records the gradient and learning rate of each step and counts zero_grad()."""

    def __init__(self, model: AuditModel):
        super().__init__(model.parameters(), lr=LEARNING_RATE)
        self._model = model

    def step(self, closure=None):
        tape, grad = self._model.tape, self._model.weight.grad
        tape.steps.append((len(tape.incoming), flat(grad), self.param_groups[0]["lr"]))
        return super().step(closure)

    def zero_grad(self, set_to_none: bool = True) -> None:
        self._model.tape.zero_grads += 1
        super().zero_grad(set_to_none)


class AuditScheduler(torch.optim.lr_scheduler.LambdaLR):
    """A linear warmup over `warmup_updates` that records when the loop steps it."""

    def __init__(self, optimizer: AuditSGD, warmup_updates: int):
        self._tape = None  # LambdaLR steps once while it is built: that one is not the loop's
        super().__init__(optimizer, linear_warmup(warmup_updates))
        self._tape = optimizer._model.tape

    def step(self, *args, **kwargs):
        if self._tape is not None:
            self._tape.scheduler_calls.append(len(self._tape.steps))
        return super().step(*args, **kwargs)


# ----------------------------------------------------------------------------- the runs


def reference_loop(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None, *, clip_norm=None):
    """The correct loop: each mean loss divided by its group's size, one clip/step/schedule/zero_grad per update."""
    K, n, logged, losses = accumulation_steps, len(batches), [], []
    for i, (x, y) in enumerate(batches):
        group_size = min(K, n - (i - i % K))  # K, or fewer for the uneven final group
        loss = loss_fn(model(x), y)
        (loss / group_size).backward()
        losses.append(loss.item())
        if is_update_step(i, K, n):
            if clip_norm is not None:
                torch.nn.utils.clip_grad_norm_(model.parameters(), clip_norm)
            optimizer.step()
            if scheduler is not None:
                scheduler.step()
            optimizer.zero_grad(set_to_none=True)
            logged.append(sum(losses) / len(losses))
            losses = []
    return logged


@dataclass
class Run:
    """One watched run: its tape, the final weight, what the loop returned or the error it raised."""

    tape: Tape
    weight: torch.Tensor
    returned: object = None
    error: str | None = None
    warnings: list[str] = field(default_factory=list)


def run_loop(loop: Callable, problem: Problem) -> Run:
    """Call `loop(model, optimizer, loss_fn, batches, K[, scheduler])` with fresh instruments; never raises."""
    model = AuditModel()
    optimizer = AuditSGD(model)
    args = [model, optimizer, torch.nn.MSELoss(), [(x.clone(), y.clone()) for x, y in problem.batches], problem.K]
    if problem.with_scheduler:
        args.append(AuditScheduler(optimizer, len(problem.groups)))
    run = Run(model.tape, model.weight)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            run.returned = loop(*args)
        except Exception as error:  # the learner's mistake is the report, not a traceback
            run.error = f"{type(error).__name__}: {error}, at {_where(error)}"
    run.weight = model.weight.detach().clone()
    run.warnings = list(dict.fromkeys(str(w.message).split(". ")[0] for w in caught))[:3]  # first sentences
    return run


def _where(error: BaseException) -> str:
    """The innermost line of the learner's own code in the traceback."""
    library = (os.path.dirname(torch.__file__), os.path.dirname(os.path.dirname(__file__)))  # torch and this package
    frames = traceback.extract_tb(error.__traceback__)
    own = [f for f in frames if not f.filename.startswith(library)] or frames[-1:]
    if not own:
        return "location unknown"
    f = own[-1]
    return f"line {f.lineno} of {f.name}" + (f": {f.line.strip()}" if f.line else "")
