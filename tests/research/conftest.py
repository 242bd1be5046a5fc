"""The shared researcher compute is tiny: one CPU thread runs it faster than two (and far faster on a busy machine)."""
import pytest

from widgets.core.training import one_thread


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    with one_thread():
        yield
