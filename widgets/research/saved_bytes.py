"""What autograd keeps for backward, in bytes: the activation term of training memory, measured.

`SavedTensorCounter` is the measurement notebook researcher_4 shows in a cell; `memory.py`'s
`measure_memory_terms` counts with it.
"""
from __future__ import annotations

import torch


class SavedTensorCounter(torch.autograd.graph.saved_tensors_hooks):
    """Context manager: bytes of the distinct storages autograd saves for backward while it is open;
    `parameter_bytes` is the part that is parameter storage (weights saved for backward)."""

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
