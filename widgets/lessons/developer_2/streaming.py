"""A stream has no total to close its uneven last window with: looking one item ahead is enough."""
from __future__ import annotations

from typing import Iterable, Iterator, TypeVar

T = TypeVar("T")


def with_last_flag(items: Iterable[T]) -> Iterator[tuple[T, bool]]:
    """Yield (item, is_last) for each item, reading one item ahead; works on any iterable, once."""
    iterator = iter(items)
    try:
        current = next(iterator)
    except StopIteration:
        return
    for following in iterator:
        yield current, False
        current = following
    yield current, True
