"""The lab's one thread control: its tiny models run fastest on one thread, above all on a shared CPU."""
from __future__ import annotations

import contextlib
from typing import Iterator

import torch


@contextlib.contextmanager
def torch_threads(count: int | None = 1) -> Iterator[None]:
    """Run the block with `count` torch threads (None: as they are), then give the caller's count back."""
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
