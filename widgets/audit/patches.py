"""What a loop replaced in torch, math, Python's builtins or the auditor itself, put back after it ran.

A loop that sets `torch.allclose = lambda *a, **k: True` would otherwise talk the auditor into a
verdict and spoil every later audit in the kernel.
"""
from __future__ import annotations

import builtins
import inspect
import math
import operator
import sys
from contextlib import contextmanager
from typing import Iterator

import torch

_MISSING = object()
_CHANGES_ON_ITS_OWN = {("builtins", "_"),  # the interactive interpreter's last value (callable or not)
                       ("torch", "Storage")}  # set_default_dtype's alias of the default dtype's storage class


@contextmanager
def put_back() -> Iterator[list[str]]:
    """Yield a list that, after the block, names each function the block replaced (all put back)."""
    modules = [builtins, math, operator, torch, torch.nn.functional, torch.autograd, torch.nn.utils, torch.linalg,
               torch.optim.lr_scheduler, torch.amp, sys.modules["widgets.core.time_limit"]]
    modules += [m for name, m in sorted(sys.modules.items()) if name.startswith("widgets.audit.") and m is not None]
    classes = {"torch.Tensor": torch.Tensor, "torch.nn.Module": torch.nn.Module}
    classes.update((f"{c.__module__}.{c.__qualname__}", c) for c in (
        torch.nn.Linear, torch.nn.Embedding, torch.optim.Optimizer, torch.optim.SGD, torch.nn.MSELoss,
        torch.amp.GradScaler, torch.overrides.TorchFunctionMode))
    saved = [(label, space, dict(vars(space))) for label, space in [(m.__name__, m) for m in modules]
             + list(classes.items())]
    replaced: list[str] = []
    try:
        yield replaced
    finally:
        for label, space, before in saved:
            now = vars(space)
            shown = "" if label == "builtins" else f"{label}."
            for name, value in before.items():
                if not callable(value) or (label, name) in _CHANGES_ON_ITS_OWN:
                    continue  # functions and classes only: a module's own state (a counter, a cache) may change
                new = now.get(name, _MISSING)
                if new is not value and _unwrapped(new) is not value:  # torch wraps some itself (manual_seed)
                    setattr(space, name, value)
                    replaced.append(shown + name)
            if isinstance(space, type):
                for name in set(now) - set(before):  # a method added over the inherited one (Tensor.add_)
                    delattr(space, name)
                    replaced.append(shown + name)


def _unwrapped(value: object) -> object:
    try:
        return inspect.unwrap(value)
    except Exception:  # a cycle of __wrapped__, or an attribute that raises
        return value
