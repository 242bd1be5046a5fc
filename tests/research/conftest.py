"""The researcher-tier models are tiny: one CPU thread runs them faster than two (and far faster on a busy machine)."""
import pytest

from widgets.core.threads import one_thread


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    with one_thread():
        yield


@pytest.fixture
def before_allocating(monkeypatch):
    """The default ceilings, and `with before_allocating():` a block in which torch's tensor and
    layer factories fail: a BudgetError raised inside it came before the request's first tensor."""
    from contextlib import contextmanager

    import torch

    from widgets.core.budget import MEMORY_ENV, TIME_ENV

    monkeypatch.delenv(MEMORY_ENV, raising=False)
    monkeypatch.delenv(TIME_ENV, raising=False)

    def allocated(*args, **kwargs):
        raise AssertionError("a tensor or layer was made before the budget check")

    @contextmanager
    def forbid():
        with pytest.MonkeyPatch.context() as patch:
            for name in ("randn", "rand", "randint", "linspace"):  # (a check may make a 1-element tensor)
                patch.setattr(torch, name, allocated)
            for name in ("Linear", "Embedding", "GRU", "BatchNorm1d", "LayerNorm", "GroupNorm"):
                patch.setattr(torch.nn, name, allocated)
            yield

    return forbid
