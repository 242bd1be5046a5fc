"""`one_thread`: one thread inside, the caller's setting restored after, also on error."""
import pytest
import torch

from widgets.core.threads import one_thread


def test_one_thread_inside_and_restored_after_an_error():
    before = torch.get_num_threads()
    with pytest.raises(RuntimeError):
        with one_thread():
            assert torch.get_num_threads() == 1
            raise RuntimeError("inside")
    assert torch.get_num_threads() == before
