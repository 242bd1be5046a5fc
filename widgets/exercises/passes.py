"""Which backward passes reached an answer's parameters, and which forwards (of how many examples) each went through.

A `TorchFunctionMode` sees a forward however it is written (`model(x)`, `F.linear`, `x @ w.T`, `torch.func`)."""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_leaves

from widgets.core.time_limit import TIME_LIMIT_S  # the lab's one time limit; the checkers' problems take well under 1 s
from widgets.exercises.toolkit import Wrong


@dataclass
class Watched:
    """`forwards[k]`: the examples of forward k; `passes[j]`: the forwards pass j went through; `reached[j]`: a parameter?"""

    forwards: list[int] = field(default_factory=list)
    owners: list[int] = field(default_factory=list)  # which of the watched modules forward k entered
    passes: list[list[int]] = field(default_factory=list)
    reached: list[bool] = field(default_factory=list)

    @property
    def parameter_passes(self) -> list[list[int]]:
        """The examples of each forward, for every pass that reached a parameter (or, under `torch.func`, a copy)."""
        return [[self.forwards[k] for k in sorted(p)] for p, r in zip(self.passes, self.reached) if r or p]


class PassWatch(TorchFunctionMode):
    """`with PassWatch(*modules) as watch: answer(...)`, then read `watch.record`; stops answers past `time_limit_s`."""

    def __init__(self, *modules: torch.nn.Module, time_limit_s: float | None = None):
        super().__init__()
        self.time_limit_s = TIME_LIMIT_S if time_limit_s is None else time_limit_s
        self._deadline = time.monotonic() + self.time_limit_s
        self._parameters = [p for m in modules for p in m.parameters() if p.requires_grad]
        self._owner = {p.untyped_storage().data_ptr(): i for i, m in enumerate(modules) for p in m.parameters()}
        self.record = Watched()
        self._task_of: dict[int, int] = {}  # graph-task id -> index into record.passes
        self._handles: list = []

    def __enter__(self) -> "PassWatch":
        self._handles = [p.register_hook(lambda grad: self._on_parameter()) for p in self._parameters]
        return super().__enter__()

    def __exit__(self, *exc) -> None:
        super().__exit__(*exc)
        for handle in self._handles:
            handle.remove()

    def _owner_of(self, t: torch.Tensor) -> int | None:
        """The module whose parameter `t` is (or shares memory with, or a `torch.func` wrapper wraps); else None."""
        while torch._C._functorch.is_functorch_wrapped_tensor(t):
            t = torch._C._functorch.get_unwrapped(t)
        try:
            return self._owner.get(t.untyped_storage().data_ptr())
        except (RuntimeError, NotImplementedError):  # a tensor without storage of its own
            return None

    def _pass(self) -> int:
        task = torch._C._current_graph_task_id()  # one id per backward pass, .backward() or autograd.grad
        if task not in self._task_of:
            self._task_of[task] = len(self.record.passes)
            self.record.passes.append([])
            self.record.reached.append(False)
        return self._task_of[task]

    def _on_output(self, k: int) -> None:
        self.record.passes[self._pass()].append(k)

    def _on_parameter(self) -> None:
        self.record.reached[self._pass()] = True

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if time.monotonic() > self._deadline:
            raise TimeoutError(f"your function ran past the checker's time limit of {self.time_limit_s:g} s "
                               "and was stopped: does every loop in it end?")
        result = func(*args, **(kwargs or {}))
        if isinstance(result, torch.Tensor) and result.requires_grad and torch.is_grad_enabled():
            tensors = [t for t in tree_leaves((args, kwargs or {})) if isinstance(t, torch.Tensor)]
            owners = [self._owner_of(t) for t in tensors]
            parameters = [t for t, o in zip(tensors, owners) if o is not None]
            others = [t for t, o in zip(tensors, owners) if o is None]
            data = [t for t in others if not t.requires_grad and t.dim() >= 1]
            # where data enters the model: a parameter meets data and nothing already computed from them
            if parameters and data and not any(t.requires_grad for t in others):
                k = len(self.record.forwards)
                self.record.forwards.append(int(data[0].shape[0]))
                self.record.owners.append(next(o for o in owners if o is not None))
                result.register_hook(lambda grad, k=k: self._on_output(k))
        return result


def flat_parameters_grad(*modules: torch.nn.Module) -> torch.Tensor | None:
    """Every parameter's .grad, flat and float64, in order; None if any is empty."""
    grads = [p.grad for m in modules for p in m.parameters()]
    if any(g is None for g in grads):
        return None
    return torch.cat([g.detach().reshape(-1).double() for g in grads])


def proportional(a: torch.Tensor, b: torch.Tensor, rtol: float = 1e-6, atol: float = 1e-9) -> float | None:
    """The factor r with a = r * b, if there is one (up to the tolerances); else None."""
    r = float(a @ b / (b @ b))
    return r if torch.allclose(a, r * b, rtol=rtol, atol=atol) else None


def check_structure(watch: PassWatch, micro_batches: list[int], unit: str) -> None:
    """Raises Wrong unless the pile was built one forward and one backward pass per micro-batch, per module."""
    record, most = watch.record, max(micro_batches)
    passes = [j for j, (p, r) in enumerate(zip(record.passes, record.reached)) if r or p]
    if not passes:
        raise Wrong("no backward pass through the model reached its parameters, yet .grad is filled: it was written "
                    "by hand (a gradient worked out on paper, or on a copy of the model). Let backward() pile it up, "
                    "one micro-batch at a time")
    big = next((k for k, n in enumerate(record.forwards) if n > most), None)
    if big is not None:
        raise Wrong(f"one forward pass carried {record.forwards[big]} {unit} at once, more than a micro-batch of "
                    f"{most}: that is the big batch's memory. Run the micro-batches one by one")
    for j in passes:
        owners = [record.owners[k] for k in record.passes[j]]
        if len(owners) != len(set(owners)):
            joined = len(owners) // max(1, len(set(owners)))
            raise Wrong(f"one backward pass went through {joined} micro-batches at once: their graphs, and every "
                        "activation in them, were all kept alive until that backward, the memory of the big batch. "
                        "Call backward once per micro-batch, right after its forward")
    if len(passes) != len(micro_batches):
        raise Wrong(f"backward ran {len(passes)} times through the model for {len(micro_batches)} micro-batches: "
                    "once per micro-batch")
