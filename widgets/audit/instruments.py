"""The auditor's instruments, which watch a loop from outside and never patch it: hooks on the model,
an optimizer and scheduler that record each call, and `GradWatch` (a TorchFunctionMode) for `.grad`
changed by hand and forwards that bypass the hooks."""
from __future__ import annotations

import itertools
import math
import time
import traceback
import weakref
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, NamedTuple

import torch
from torch.utils._pytree import tree_leaves

from widgets.audit.problems import Problem, batch_key
from widgets.core import time_limit
from widgets.core.time_limit import TimeLimit

_equal = torch.equal  # bound at import: a loop that replaces torch.equal does not change what is recorded

LEARNING_RATE = 0.05  # of the SGD handed to the audited loop
MOST_RECORDED = 5000  # forwards, backward passes and .grad changes kept: a right loop makes a few hundred


class Forward(NamedTuple):
    """One forward pass of the model and the micro-batch it saw."""

    batch: int | None  # None: inputs that are none of them (or several concatenated, listed in `window`)
    weight: torch.Tensor  # the weight it ran with
    inputs: torch.Tensor
    output: torch.Tensor
    window: tuple[int, ...] = ()  # the micro-batches its inputs concatenate (a window in one pass), else ()

    @property
    def micro_batches(self) -> tuple[int | None, ...]:
        return self.window or (self.batch,)


@dataclass
class BackwardPass:
    """One backward pass that reached the weight, and the weight's gradient before, in and after it."""

    forwards: tuple[int, ...]  # indices into Tape.forwards: the outputs it went through
    output_grads: tuple[torch.Tensor, ...]  # the gradient each of them received
    incoming: torch.Tensor  # flat: the gradient autograd computed for the weight, before the loop's own hooks
    before: torch.Tensor | None  # flat .grad before it (None: no .grad)
    hooks: int = 0  # the loop's own hooks on the weight when it ran
    after: torch.Tensor | None = None  # flat .grad after it (None: a torch.autograd.grad, nothing landed)
    landed: torch.Tensor | None = None  # flat: what it added to .grad, after the loop's hooks (before DDP's mean)


class Step(NamedTuple):
    """One optimizer.step(): after how many backward passes, with which .grad, learning rate and weight."""

    passes_before: int
    grad: torch.Tensor | None
    lr: float
    weight: torch.Tensor  # the weight it started from


class GradChange(NamedTuple):
    """.grad as a torch operation of the loop left it (a rescale, a clip, an assignment)."""

    passes_before: int  # backward passes so far
    steps_before: int  # optimizer steps so far
    op: str  # the operation's name: div_, _foreach_mul_ (what clip_grad_norm_ scales with), __set__, ...
    grad: torch.Tensor  # flat, after it
    in_scaler_step: bool  # an unscale GradScaler.step did itself (the loop never called unscale_)
    after_norm: bool = False  # a norm was taken since the last change: a clip (clip_grad_norm_ reads it first)


UNSCALE_OP = "_amp_foreach_non_finite_check_and_unscale_"  # how GradScaler divides .grad by its scale
_NORMS = ("_foreach_norm", "vector_norm", "norm", "linalg_vector_norm")  # how clip_grad_norm_ measures the pile


class Tape:
    """Everything observed during one run of a loop, in order."""

    def __init__(self, model: torch.nn.Module, problem: Problem, comm=None):
        self.forwards: list[Forward] = []
        self.passes: list[BackwardPass] = []  # those that added to .grad (a torch.autograd.grad adds to nothing)
        self.steps: list[Step] = []
        self.grad_changes: list[GradChange] = []
        self.zero_grads = 0
        self.idle_steps = 0  # optimizer.step() calls that found .grad None right after a step: they move nothing
        self.backward_calls = 0  # calls of backward() (Tensor's or torch.autograd's), whatever they reached
        self.scheduler_calls: list[int] = []  # optimizer steps so far at each scheduler.step()
        self.graphs_alive = 0  # the most earlier micro-batches' graphs seen alive at a forward or a step
        self.outputs_kept = 0  # the most outputs seen alive after a backward pass freed their graphs
        self.retaining = False  # inside a backward(retain_graph=True): the graphs it goes through stay
        self.inside_module = 0  # > 0 while the module's own forward runs: its hooks record it
        self.synced_passes: list[int] = []  # DDP form: the backward passes that averaged the pile over the ranks
        self.syncing = comm is not None  # False inside model.no_sync()
        self._comm = comm
        self._problem = problem
        self._reached: list[tuple[int, torch.Tensor]] = []  # outputs reached by the running backward pass
        self._outputs: list[tuple[int, weakref.ref]] = []  # (forward index, its output), while its graph lives
        self._freed: list[weakref.ref] = []  # outputs whose graph a backward pass freed
        self._pending: BackwardPass | None = None  # the running backward pass, until it adds to .grad
        # never traced: under torch.compile the hooks run as they are, between the compiled pieces
        model.register_forward_pre_hook(torch.compiler.disable(self._before_forward))
        model.register_forward_hook(torch.compiler.disable(self._on_forward), always_call=True)  # also on a raise
        weight = model.weight
        weight.register_hook(lambda grad: self._on_backward(weight, grad))  # runs before grad is added to .grad
        weight.register_post_accumulate_grad_hook(self._after_backward)
        self._own_hooks = len(weight._backward_hooks or {})

    def count_graphs(self) -> None:
        """The most earlier forward outputs alive at once: backward frees what a graph saved, so two or more
        alive mean graphs kept for a later backward (or by retain_graph=True)."""
        self._outputs = [(k, ref) for k, ref in self._outputs if ref() is not None]
        self.graphs_alive = max(self.graphs_alive, len(self._outputs))
        self._freed = [ref for ref in self._freed if ref() is not None]
        self.outputs_kept = max(self.outputs_kept, len(self._freed))

    def _before_forward(self, module, args) -> None:
        time_limit.check()
        self.count_graphs()
        self.inside_module += 1

    def _on_forward(self, module, args, output) -> None:
        self.inside_module = max(0, self.inside_module - 1)
        if isinstance(output, torch.Tensor) and args and isinstance(args[0], torch.Tensor):
            self.record_forward(args[0], module.weight, output)

    def record_forward(self, inputs: torch.Tensor, weight: torch.Tensor, output: torch.Tensor) -> None:
        """Note one forward pass and hook its output, so a backward pass through it reports its gradient."""
        if torch._C._functorch.is_functorch_wrapped_tensor(output):
            return  # inside torch.func: its tensors die with the transform, and its gradients reach .grad by hand
        if len(self.forwards) >= MOST_RECORDED:
            return  # a loop that runs on and on (until the time limit) must not fill the memory
        k = len(self.forwards)
        batch = self._problem.index_of.get(batch_key(inputs))
        window = self._problem.window_of(inputs) if batch is None else ()
        self.forwards.append(Forward(batch, weight.detach().clone(), inputs.detach().clone(),
                                     output.detach().clone(), window))
        if output.requires_grad:
            output.register_hook(lambda grad: self._reached.append((k, grad.detach().clone())))
            self._outputs.append((k, weakref.ref(output)))

    def _on_backward(self, weight, grad) -> None:
        time_limit.check()
        self.settle()
        reached, self._reached = sorted(self._reached, key=lambda r: r[0]), []  # in forward order
        if not self.retaining:  # backward frees the graphs it went through: their outputs hold no saved tensors
            done = {k for k, _ in reached}
            self._freed += [ref for k, ref in self._outputs if k in done]
            self._outputs = [(k, ref) for k, ref in self._outputs if k not in done]
        if len(self.passes) < MOST_RECORDED:
            self._pending = BackwardPass(tuple(k for k, _ in reached), tuple(g for _, g in reached),
                                         grad.detach().reshape(-1).clone(), flat(weight.grad),
                                         len(weight._backward_hooks or {}) - self._own_hooks)

    def _after_backward(self, weight) -> None:
        pending, self._pending = self._pending, None
        if pending is not None:
            pending.landed = flat(weight.grad) - (0 if pending.before is None else pending.before)
        if self.syncing:  # DDP's all-reduce: the rank's whole pile, this pass and those under no_sync(), averaged
            self.synced_passes.append(len(self.passes))
            with torch.no_grad():
                weight.grad.copy_(self._comm.mean_over_ranks(weight.grad, weight, "backward() outside no_sync()"))
        if pending is not None:  # else MOST_RECORDED passes are recorded, no more
            pending.after = flat(weight.grad)
            self.passes.append(pending)

    def settle(self) -> None:
        """A backward pass that never added to .grad was a torch.autograd.grad: no pass (its pile is the loop's)."""
        self._pending = None


def flat(grad: torch.Tensor | None) -> torch.Tensor | None:
    """A detached flat copy of a gradient, or None when there is none."""
    return None if grad is None else grad.detach().reshape(-1).clone()


@contextmanager
def _no_sync(self):
    """DDP's no_sync(): a backward() inside only adds to this rank's pile; the next one outside averages it."""
    tape, before = self.tape, self.tape.syncing
    tape.syncing = False
    try:
        yield
    finally:
        tape.syncing = before


def watched_model(problem: Problem, comm=None) -> torch.nn.Module:
    """The task's model with its weight at zero and a tape; its class counts model.zero_grad() too.
    With `comm` it is a rank's DDP model: `no_sync()`, and each backward() outside it averages the pile."""
    model = problem.task.new_model()
    with torch.no_grad():
        model.weight.zero_()
    cls = type(model)

    def zero_grad(self, set_to_none: bool = True) -> None:
        self.tape.zero_grads += 1
        cls.zero_grad(self, set_to_none)

    # a class named and printed as the task's, set before the loop sees the model: a deepcopy counts on its own tape
    methods = {"zero_grad": zero_grad, "__module__": cls.__module__, "__qualname__": cls.__qualname__}
    model.__class__ = type(cls.__name__, (cls,), methods | ({"no_sync": _no_sync} if comm is not None else {}))
    model.tape = Tape(model, problem, comm)
    return model


class AuditSGD(torch.optim.SGD):
    """Plain SGD that records each step and counts zero_grad(); with `comm`, steps with the ranks' mean pile."""

    def __init__(self, model: torch.nn.Module, comm=None):
        super().__init__(model.parameters(), lr=LEARNING_RATE)
        self._model, self._comm = model, comm

    def step(self, closure=None):
        loss = None
        if closure is not None:  # as SGD.step runs it, but first: the step is recorded with what it built
            with torch.enable_grad():
                loss = closure()
        tape = self._model.tape
        time_limit.check()
        tape.settle()
        tape.count_graphs()
        weight = self._model.weight
        if weight.grad is None and tape.steps and tape.steps[-1].passes_before == len(tape.passes):
            tape.idle_steps += 1  # right after a step, .grad None: every optimizer skips the weight
        elif len(tape.steps) < MOST_RECORDED:
            tape.steps.append(Step(len(tape.passes), flat(weight.grad), self.param_groups[0]["lr"],
                                   weight.detach().clone()))
        if self._comm is not None:  # DDP averages the ranks' piles; here at the step (clipping is not audited)
            weight.grad = self._comm.mean_over_ranks(weight.grad, weight)
        super().step()
        return loss

    def zero_grad(self, set_to_none: bool = True) -> None:
        time_limit.check()
        self._model.tape.zero_grads += 1
        super().zero_grad(set_to_none)


class AuditScheduler(torch.optim.lr_scheduler.LambdaLR):
    """A linear warmup over `warmup_updates` that records when the loop steps it."""

    def __init__(self, optimizer: AuditSGD, warmup_updates: int):
        self._tape = optimizer._model.tape
        super().__init__(optimizer, lambda n: min(1.0, (n + 1) / (warmup_updates + 1)))
        self._tape.scheduler_calls.clear()  # LambdaLR steps once while it is built: that one is not the loop's

    def step(self, *args, **kwargs):
        self._tape.scheduler_calls.append(len(self._tape.steps))
        return super().step(*args, **kwargs)


class GradWatch(torch.overrides.TorchFunctionMode):
    """Notes .grad each time a torch call changes its values, and forwards that bypass the hooks (`x @ w.T`)."""

    def __init__(self, model: torch.nn.Module):
        super().__init__()
        self._weight, self._tape, self._seen = model.weight, model.tape, None
        self._norm_read = False

    def __torch_function__(self, func, types, args=(), kwargs=None):
        time_limit.check()
        name = getattr(func, "__name__", str(func))
        retain = name in ("backward", "grad") and bool((kwargs or {}).get("retain_graph"))
        self._tape.backward_calls += name == "backward"
        self._norm_read |= name in _NORMS
        self._tape.retaining |= retain
        try:
            result = func(*args, **(kwargs or {}))
        finally:
            self._tape.retaining &= not retain
        if self._tape.inside_module == 0 and isinstance(result, torch.Tensor) and result.requires_grad \
                and torch.is_grad_enabled():
            self._bypassing_forward(args, kwargs, result)
        now = flat(self._weight.grad)
        if (now is None) != (self._seen is None) or (now is not None and not _equal(now, self._seen)):
            self._seen = now  # values compared: GradScaler's in-place unscale bumps no `_version`
            if now is not None and len(self._tape.grad_changes) < MOST_RECORDED:
                tape = self._tape
                tape.grad_changes.append(GradChange(len(tape.passes), len(tape.steps), name, now,
                                                    name == UNSCALE_OP and _inside_scaler_step(), self._norm_read))
            self._norm_read = False
        return result

    def _bypassing_forward(self, args, kwargs, result: torch.Tensor) -> None:
        """Record `result` as a forward when this call is where data met the weight outside the module."""
        tensors = [t for t in tree_leaves((args, kwargs or {})) if isinstance(t, torch.Tensor)]
        others = [t for t in tensors if not self._is_weight(t)]  # the weight, or a view of it, is among them
        data = [t for t in others if not t.requires_grad and t.dim() >= 1]
        if len(others) < len(tensors) and data and not any(t.requires_grad for t in others):
            self._tape.count_graphs()
            self._tape.record_forward(data[0], self._weight, result)

    def _is_weight(self, t: torch.Tensor) -> bool:
        """The model's weight, or a view of it (the same memory: weight.T, weight[0])."""
        try:
            return t.untyped_storage().data_ptr() == self._weight.untyped_storage().data_ptr()
        except (RuntimeError, NotImplementedError):  # a tensor without storage of its own (torch.func)
            return False


def _inside_scaler_step() -> bool:
    """Is GradScaler.step on the call stack? Only the caller tells its own unscale from the loop's unscale_."""
    return any(frame.f_code.co_name == "step" and frame.f_code.co_filename.endswith("grad_scaler.py")
               for frame, _ in traceback.walk_stack(None))


@dataclass
class Run:
    """One watched run: its tape, the final weight, the log it returned or the error it raised."""

    tape: Tape
    weight: torch.Tensor
    error: str | None = None
    log: list[float] | None = None  # the returned log as numbers (None: nothing returned, or no list of numbers)
    log_problem: str | None = None  # why the returned value is no log, in words
    timed_out: bool = False
    error_message: str = ""  # the exception's own message, for explaining it


def run_loop(loop: Callable, problem: Problem, time_limit_s: float = math.inf, comm=None, ddp: bool = False) -> Run:
    """Run `loop` with fresh instruments under the time limit; never raises for what the loop does.
    With `comm`, as one rank: passed as `comm=`, or with `ddp` a model that syncs as DDP's does."""
    model = watched_model(problem, comm if ddp else None)
    optimizer = AuditSGD(model, None if ddp else comm)
    batches = [(x.clone(), y.clone()) for x, y in problem.batches]
    args = [model, optimizer, problem.task.loss_fn, batches, problem.K]
    if problem.with_scheduler:
        args.append(AuditScheduler(optimizer, len(problem.windows)))
    run = Run(model.tape, model.weight)
    keywords = {} if comm is None or ddp else {"comm": comm}

    def watched() -> tuple:
        with GradWatch(model):
            return read_log(loop(*args, **keywords), MOST_RECORDED)  # a returned generator runs here too

    deadline = time.monotonic() + time_limit_s
    try:
        if math.isinf(time_limit_s):  # the reference: the lab's own loop
            run.log, run.log_problem = watched()
        else:
            run.log, run.log_problem = time_limit.call(time_limit_s, watched)
    except TimeLimit as stop:
        said = printable(stop) or f"the loop ran past the time limit of {time_limit_s:g} s"
        run.error, run.timed_out = f"{said}, at {_where(stop)}", True
    except KeyboardInterrupt:  # the learner's own interrupt: the audit stops with it
        raise
    except BaseException as error:  # noqa: BLE001 - the learner's mistake is the report, not a traceback
        if time.monotonic() >= deadline:  # the stop landed in torch's own code (a mode's exit), which raised
            run.error, run.timed_out = f"the loop ran past the time limit of {time_limit_s:g} s, at {_where(error)}", True
        else:
            run.error_message = printable(error)
            run.error = f"{printable(type(error).__name__)}: {run.error_message}, at {_where(error)}"
    model.tape.settle()
    run.weight = model.weight.detach().clone()
    return run


def read_log(returned: object, most: int) -> tuple[list[float] | None, str | None]:
    """The returned value as at most `most` numbers (an endless iterator ends), or why it is no log."""
    if returned is None:
        return None, None
    what = f"{printable(type(returned).__name__)} {printable(returned, repr)[:50]}"
    if isinstance(returned, (str, bytes)):
        return None, f"it returned {what}: a log must be a list of numbers, not text"
    try:
        return [float(v) for v in itertools.islice(iter(returned), most)], None  # type: ignore[call-overload]
    except Exception:
        return None, f"it returned {what}: a log must be a list of numbers"


def printable(value: object, show: Callable = str) -> str:
    """str(value), or a placeholder when the value's own __str__ raises."""
    try:
        return show(value)
    except Exception:
        return f"<a {type(value).__name__} that could not be printed>"


def _where(error: BaseException) -> str:
    """The innermost line of the learner's own code in the traceback."""
    frames = traceback.extract_tb(error.__traceback__)
    own = [f for f in frames if time_limit.learners_code(f.filename)] or frames[-1:]
    if not own:
        return "location unknown"
    f = own[-1]
    return f"line {f.lineno} of {f.name}" + (f": {f.line.strip()}" if f.line else "")
