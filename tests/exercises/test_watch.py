"""The backward watch: how many backward passes reached the model, and the examples each one carried."""
import torch

from widgets.exercises.watch import BackwardWatch

mse = torch.nn.functional.mse_loss


def _problem():
    g = torch.Generator().manual_seed(0)
    return torch.nn.Linear(3, 1), torch.randn(8, 3, generator=g), torch.randn(8, 1, generator=g)


def test_one_pass_per_micro_batch_with_its_examples_and_the_pile_before_and_after():
    model, x, y = _problem()
    with BackwardWatch(model) as watch:
        for i in range(0, 8, 2):
            (mse(model(x[i:i + 2]), y[i:i + 2]) / 4).backward()
    assert watch.passes == [[2]] * 4 and watch.forwards == [2] * 4
    assert watch.before[0] is None
    for j in range(1, 4):
        assert torch.equal(watch.before[j], watch.after[j - 1])
        assert torch.allclose(watch.after[j], watch.before[j] + watch.incoming[j])


def test_micro_batches_summed_into_one_backward_show_as_one_pass():
    model, x, y = _problem()
    with BackwardWatch(model) as watch:
        sum(mse(model(x[i:i + 2]), y[i:i + 2]) / 4 for i in range(0, 8, 2)).backward()
    assert watch.passes == [[2, 2, 2, 2]]


def test_one_big_forward_and_forwards_without_grad():
    model, x, y = _problem()
    with BackwardWatch(model) as watch:
        with torch.no_grad():
            model(x)  # e.g. for logging: nothing to backpropagate, not counted
        mse(model(x), y).backward()
    assert watch.forwards == [8] and watch.passes == [[8]]


def test_the_hooks_are_removed_afterwards():
    model, x, y = _problem()
    with BackwardWatch(model) as watch:
        pass
    mse(model(x), y).backward()
    assert watch.passes == [] and watch.forwards == []
