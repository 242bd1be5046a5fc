"""The lab's one thread control. Tiny tensors want one thread: the lab's models hold a few dozen
numbers, where a second thread only waits on the first, and on a shared or single CPU (Binder, a
loaded CI runner) the waiting turns milliseconds into seconds. torch and the standard library only.
"""
from __future__ import annotations

import contextlib
from typing import Iterator

import torch


@contextlib.contextmanager
def torch_threads(count: int | None = 1) -> Iterator[None]:
    """Run the block with `count` torch threads (None: as they are), then give the caller's count
    back, also on error and also when the block changed it."""
    before = torch.get_num_threads()
    if count is not None and count != before:  # a change rebuilds torch's thread pool: only when needed
        torch.set_num_threads(count)
    try:
        yield
    finally:
        if torch.get_num_threads() != before:
            torch.set_num_threads(before)


def one_thread() -> contextlib.AbstractContextManager:
    """`torch_threads(1)`: one thread for the block, the caller's count after."""
    return torch_threads(1)
