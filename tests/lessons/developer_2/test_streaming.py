"""`with_last_flag`: the last item, and only it, is flagged, on streams without a length."""
import pytest

from widgets.core.accumulation import is_update_step
from widgets.lessons.developer_2.streaming import with_last_flag


@pytest.mark.parametrize("n", [0, 1, 2, 7])
def test_only_the_last_item_is_flagged(n):
    flagged = list(with_last_flag(x for x in range(n)))  # a generator: no len()
    assert [item for item, _ in flagged] == list(range(n))
    assert [last for _, last in flagged] == [i == n - 1 for i in range(n)]


@pytest.mark.parametrize("n, K", [(10, 4), (8, 4), (1, 3), (7, 1)])
def test_boundaries_match_is_update_step_with_the_total(n, K):
    streamed = [is_update_step(i, K) or last for i, (_, last) in enumerate(with_last_flag(iter(range(n))))]
    assert streamed == [is_update_step(i, K, n) for i in range(n)]
