"""Accumulating over a stream whose length is unknown (an IterableDataset, a generator).

`is_update_step(i, K, total)` needs the total to close the uneven last window; a stream has none.
Looking one item ahead is enough: `with_last_flag` yields each item with "is this the last one?".
torch-free, standard library only.
"""
from __future__ import annotations

from typing import Iterable, Iterator, TypeVar

T = TypeVar("T")


def with_last_flag(items: Iterable[T]) -> Iterator[tuple[T, bool]]:
    """Yield (item, is_last) for each item, reading one item ahead; works on any iterable, once."""
    try:
        iterator = iter(items)
    except TypeError:
        raise TypeError(f"items must be iterable (a DataLoader, a list, a generator), got {type(items).__name__}") from None
    try:
        current = next(iterator)
    except StopIteration:
        return
    for following in iterator:
        yield current, False
        current = following
    yield current, True
