"""Oracle tests: the accumulated gradient is the big-batch gradient, the classic bug is not."""
import pytest
import torch

from widgets.core.accumulation import (
    accumulated_gradient,
    big_batch_gradient,
    compare_gradients,
    flat_parameter_indices,
    is_update_step,
    make_model,
    make_regression_data,
    micro_batch_weight,
    micro_batch_weights,
    windows,
)
from widgets.core.training import mse

X, Y = make_regression_data(256, seed=3)


GRID = [(n, b) for n in (1, 7, 32, 100, 256) for b in (1, 3, 8, 64) if b <= n]  # a micro-batch fits its batch


@pytest.mark.parametrize("batch_size, micro_batch_size", GRID)
def test_accumulated_equals_big_batch_even_with_uneven_last_window(batch_size, micro_batch_size):
    model = make_model(seed=1)
    x, y = X[:batch_size], Y[:batch_size]
    target = big_batch_gradient(model, x, y, mse)
    pile = accumulated_gradient(model, x, y, mse, micro_batch_size)
    diff, close = compare_gradients(pile.accumulated, target)
    assert close, diff


@pytest.mark.parametrize("micro_batch_size", [2, 8, 16])
def test_loss_not_divided_is_k_times_too_big(micro_batch_size):
    model = make_model(seed=1)
    x, y = X[:64], Y[:64]
    target = big_batch_gradient(model, x, y, mse)
    pile = accumulated_gradient(model, x, y, mse, micro_batch_size, divide_loss=False)
    K = 64 // micro_batch_size
    assert not compare_gradients(pile.accumulated, target)[1]
    assert torch.allclose(pile.accumulated, K * target, rtol=1e-4, atol=1e-5)


def test_pile_has_one_snapshot_per_micro_batch_and_leaves_grad_clean():
    model = make_model(seed=1)
    pile = accumulated_gradient(model, X[:10], Y[:10], mse, 4)
    assert pile.pile.shape[0] == 3 and pile.micro_batch_sizes == (4, 4, 2)
    assert all(p.grad is None for p in model.parameters())


@pytest.mark.parametrize(
    "K, total, expected",
    [
        (1, None, [True] * 5),
        (2, None, [False, True, False, True, False]),
        (2, 5, [False, True, False, True, True]),  # the uneven last window still gets its update
        (3, 5, [False, False, True, False, True]),
    ],
)
def test_boundary_predicate(K, total, expected):
    assert [is_update_step(i, K, total) for i in range(5)] == expected


@pytest.mark.parametrize("K, total", [(1, 5), (3, 7), (4, 8), (4, 14), (5, 3), (2, 0)])
def test_windows_are_the_micro_steps_between_two_updates(K, total):
    """Each window ends where is_update_step says an update ends."""
    found = windows(total, K)
    assert [m for window in found for m in window] == list(range(total))  # every micro-step once, in order
    assert [window[-1] for window in found] == [m for m in range(total) if is_update_step(m, K, total)]
    assert all(len(window) == K for window in found[:-1])  # only the last may be short


def test_windows_of_ten_micro_steps_at_k_four():
    assert windows(10, 4) == [range(0, 4), range(4, 8), range(8, 10)]


def test_flat_parameter_indices_follow_named_parameters():
    model = make_model(seed=0)  # 0.weight 16, 0.bias 16, 2.weight 16, 2.bias 1
    assert flat_parameter_indices(model, [("0.weight", 0), ("2.weight", 1), ("2.bias", 0)]) == {
        "0.weight[0]": 0, "2.weight[1]": 33, "2.bias": 48}


@pytest.mark.parametrize("sizes", [[4, 4, 4, 4], [8, 8, 3], [1], [5, 1, 1, 9]])
def test_weights_sum_to_one_and_follow_sizes(sizes):
    weights = micro_batch_weights(sizes)
    assert sum(weights) == pytest.approx(1.0)
    assert weights[0] / weights[-1] == pytest.approx(sizes[0] / sizes[-1])


def test_equal_micro_batches_are_weighted_one_over_k():
    assert micro_batch_weights([8] * 4) == [0.25] * 4


@pytest.mark.parametrize(
    "call, word",
    [
        (lambda: accumulated_gradient(make_model(), X[:4], Y[:4], mse, 5), "micro_batch_size"),
        (lambda: accumulated_gradient(make_model(), X[:4], Y[:4], mse, 1.5), "micro_batch_size"),
        (lambda: is_update_step(0, 0), "accumulation_steps"),
        (lambda: is_update_step(-1, 2), "micro_step"),
        (lambda: is_update_step(5, 2, 3), "total_micro_steps"),
        (lambda: micro_batch_weight(5, 4), "micro_batch_examples"),
        (lambda: micro_batch_weight(1, 0), "update_examples"),
        (lambda: make_regression_data(0), "num_examples"),
        (lambda: make_model(seed=-2), "seed"),
        (lambda: accumulated_gradient(make_model(), X[:4], Y[:3], mse, 2), "same number of examples"),
        (lambda: compare_gradients(torch.zeros(2), torch.zeros(3)), "same shape"),
    ],
)
def test_bad_input_names_the_parameter(call, word):
    with pytest.raises((ValueError, TypeError), match=word):
        call()


def test_data_and_model_are_deterministic():
    assert torch.equal(make_regression_data(50, 7)[1], make_regression_data(50, 7)[1])
    a, b = make_model(5), make_model(5)
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))


def test_flat_weights_is_every_parameter_detached_in_order():
    from widgets.core.accumulation import flat_weights

    model = make_model(seed=3)
    flat = flat_weights(model)
    assert not flat.requires_grad
    assert torch.equal(flat, torch.cat([p.reshape(-1) for p in model.parameters()]).detach())


def test_non_finite_gradients_are_never_allclose():
    inf, nan = torch.tensor([1.0, float("inf")]), torch.tensor([1.0, float("nan")])
    assert compare_gradients(inf, inf).allclose is False  # torch.allclose alone calls inf == inf close
    assert compare_gradients(nan, nan).allclose is False
    assert compare_gradients(torch.ones(2), torch.ones(2)) == (0.0, True)


def test_micro_batch_weights_are_linear_in_the_number_of_micro_batches():
    import time

    start = time.perf_counter()
    weights = micro_batch_weights([3] * 50_000)  # quadratic, this took many seconds
    assert time.perf_counter() - start < 2.0
    assert weights[0] == pytest.approx(1 / 50_000) and sum(weights) == pytest.approx(1.0)
