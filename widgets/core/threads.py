"""One thread for tiny tensors: the lab's models hold a few dozen numbers, where a second thread
only waits on the first, and on a shared or single CPU (Binder, a loaded CI runner) the waiting
turns milliseconds into seconds. torch and the standard library only.
"""
from __future__ import annotations

import contextlib
from typing import Iterator

import torch


@contextlib.contextmanager
def one_thread() -> Iterator[None]:
    """Run the block with `torch.set_num_threads(1)`, then restore the caller's setting."""
    before = torch.get_num_threads()
    if before != 1:  # a change rebuilds torch's thread pool: only when needed
        torch.set_num_threads(1)
    try:
        yield
    finally:
        if torch.get_num_threads() != before:
            torch.set_num_threads(before)
