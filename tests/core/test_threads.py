"""`torch_threads`, the lab's one thread control: the count asked for inside, the caller's after,
also on error and also when the block changed it; `known_torch_state` uses it."""
import pytest
import torch

from widgets.core.training import known_torch_state, one_thread, torch_threads


def test_one_thread_inside_and_restored_after_an_error():
    before = torch.get_num_threads()
    with pytest.raises(RuntimeError):
        with one_thread():
            assert torch.get_num_threads() == 1
            raise RuntimeError("inside")
    assert torch.get_num_threads() == before


@pytest.mark.parametrize("control", [lambda: torch_threads(None), lambda: known_torch_state(threads=None),
                                     lambda: known_torch_state()])
def test_a_count_changed_inside_is_given_back(control):
    before = torch.get_num_threads()
    with control():
        torch.set_num_threads(3)
    assert torch.get_num_threads() == before


def test_none_leaves_the_count_as_it_is():
    with torch_threads(2):
        with torch_threads(None):
            assert torch.get_num_threads() == 2
