"""The researcher-tier models are tiny: one CPU thread runs them faster than two (and far faster on a busy machine)."""
import pytest

from widgets.core.threads import one_thread


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    with one_thread():
        yield
