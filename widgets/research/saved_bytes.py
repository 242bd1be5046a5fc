"""What autograd keeps for backward, and the most a micro-step holds at once (two ways: the tensors operators
return, the same on every CPU, and the CPU allocator's own events, what a memory budget sees), in bytes."""
from __future__ import annotations

import itertools
import os
import sys
from typing import Callable

import torch
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves


class SavedTensorCounter(torch.autograd.graph.saved_tensors_hooks):
    """Bytes of the distinct storages autograd saves while open; `parameter_bytes`: the part that
    is weights."""

    def __init__(self, model: torch.nn.Module):
        self._param_ptrs = {p.untyped_storage().data_ptr() for p in model.parameters()}
        self._seen: dict[int, int] = {}  # storage address -> bytes: views of one storage count once
        super().__init__(self._pack, lambda t: t)

    def _pack(self, tensor: torch.Tensor) -> torch.Tensor:
        self._seen[tensor.untyped_storage().data_ptr()] = tensor.untyped_storage().nbytes()
        return tensor  # kept as it is: the counter only looks

    def __enter__(self) -> "SavedTensorCounter":
        super().__enter__()
        return self

    @property
    def total(self) -> int:
        return sum(self._seen.values())

    @property
    def parameter_bytes(self) -> int:
        return sum(n for ptr, n in self._seen.items() if ptr in self._param_ptrs)


class PeakBytesCounter(TorchDispatchMode):
    """Bytes of the storages operators return while open (not a kernel's scratch space): `now` alive and the `peak`."""

    def __init__(self):
        super().__init__()
        self._alive: dict[int, tuple[StorageWeakRef, int]] = {}  # storage -> (weak reference, bytes)
        self.now = self.peak = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for key, (ref, nbytes) in list(self._alive.items()):  # storages freed since the last operator
            if ref.expired():
                del self._alive[key]
                self.now -= nbytes
        # a view or an in-place result shares an input's storage: not a new allocation
        inputs = {StorageWeakRef(t.untyped_storage()).cdata for t in tree_leaves((args, kwargs))
                  if isinstance(t, torch.Tensor)}
        for t in tree_leaves(out):
            if isinstance(t, torch.Tensor):
                ref = StorageWeakRef(t.untyped_storage())
                if ref.cdata not in inputs and ref.cdata not in self._alive:
                    self._alive[ref.cdata] = (ref, t.untyped_storage().nbytes())
                    self.now += t.untyped_storage().nbytes()
        self.peak = max(self.peak, self.now)
        return out


def allocator_peak(step: Callable[[], object]) -> int:
    """The highest running sum of the CPU allocator's allocations and frees during `step()`, in bytes (`torch.profiler`)."""
    from torch.profiler import ProfilerActivity, profile
    sys.stderr.flush()
    saved, devnull = os.dup(2), os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)  # file descriptor 2: the profiler's native library prints a line nothing turns off
    try:
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
            step()
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)
    events = sorted((e for e in prof.profiler.kineto_results.events() if e.name() == "[memory]"),
                    key=lambda e: e.start_ns())
    return max([0, *itertools.accumulate(e.nbytes() for e in events)])
