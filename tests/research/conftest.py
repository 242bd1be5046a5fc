"""The researcher-tier models are tiny: one CPU thread runs them faster than two (and far faster on a busy machine)."""
import pytest
import torch


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
