"""BatchNorm: accumulation fails allclose against the big batch; LayerNorm, GroupNorm and frozen BN pass;
accumulated BN passes against ghost BN of size b; the running mean moves K times (closed form)."""
import pytest
import torch

from widgets.lessons.researcher_2.batchnorm import (
    GhostBatchNorm1d,
    accumulated_norm_gradient,
    big_batch_norm_gradient,
    NORMS,
    compare_norm,
    make_norm_data,
    make_norm_model,
    running_stats_after_one_update,
)

SEEDS = (0, 1, 2)
KS = (2, 4, 8)


def oracle_big(model, x, y):
    model.zero_grad(set_to_none=True)
    torch.nn.functional.mse_loss(model(x), y).backward()
    return torch.cat([p.grad.reshape(-1) for p in model.parameters()]).detach().clone()


def close(a, b):
    return torch.allclose(a, b, rtol=1e-7, atol=1e-10)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("K", KS)
def test_batch_norm_breaks(seed, K):
    c = compare_norm("batch", K, seed=seed)
    x, y = make_norm_data(64, seed=seed)
    assert close(c.big, oracle_big(make_norm_model("batch", seed=seed), x, y))
    assert not close(c.accumulated, c.big) and not c.allclose


@pytest.mark.parametrize("norm", ["layer", "group", "batch_frozen"])
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("K", KS)
def test_per_example_or_frozen_norms_fix_it(norm, seed, K):
    c = compare_norm(norm, K, seed=seed)
    x, y = make_norm_data(64, seed=seed)
    assert close(c.big, oracle_big(make_norm_model(norm, seed=seed), x, y))
    assert c.allclose


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("K", KS)
def test_accumulated_batch_norm_is_ghost_batch_norm_of_size_b(seed, K):
    x, y = make_norm_data(64, seed=seed)
    ghost = big_batch_norm_gradient(make_norm_model("ghost_batch", seed=seed, ghost_size=64 // K), x, y)
    accumulated = accumulated_norm_gradient(make_norm_model("batch", seed=seed), x, y, K)
    assert torch.allclose(ghost, accumulated, rtol=1e-7, atol=1e-10)


def test_ghost_bn_with_one_group_is_plain_bn():
    x, y = make_norm_data(32, seed=0)
    ghost = make_norm_model("ghost_batch", seed=0, ghost_size=32)
    plain = make_norm_model("batch", seed=0)
    assert torch.allclose(ghost(x), plain(x), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("K", (1, 2, 4, 8))
def test_running_mean_moves_k_times(K):
    m = 0.1
    stats = running_stats_after_one_update(K, seed=0, momentum=m)
    x, _ = make_norm_data(64, seed=0)
    pre = make_norm_model("batch", seed=0)[0](x).detach()
    expected = torch.zeros(pre.shape[1], dtype=pre.dtype)
    for part in pre.chunk(K):
        expected = (1 - m) * expected + m * part.mean(dim=0)
    assert torch.allclose(stats.accumulated_mean, expected, rtol=1e-10, atol=1e-12)
    assert torch.allclose(stats.big_mean, m * pre.mean(dim=0), rtol=1e-10, atol=1e-12)
    assert (stats.big_batches_tracked, stats.accumulated_batches_tracked) == (1, K)


def test_gradients_leave_running_statistics_alone():
    model = make_norm_model("batch", seed=0)
    x, y = make_norm_data(64, seed=0)
    from widgets.lessons.researcher_2.batchnorm import accumulated_norm_gradient, big_batch_norm_gradient
    big_batch_norm_gradient(model, x, y)
    accumulated_norm_gradient(model, x, y, 4)
    assert float(model[1].running_mean.abs().max()) == 0.0 and int(model[1].num_batches_tracked) == 0


@pytest.mark.parametrize("call, match", [
    (lambda: make_norm_model("instance"), "norm"),
    (lambda: compare_norm("batch", 128), "accumulation_steps"),
    (lambda: compare_norm("batch", 3), "accumulation_steps must divide"),
    (lambda: compare_norm("batch", 64), "micro-batches of 1"),
    (lambda: GhostBatchNorm1d(2**24, 4), "num_features must be a whole number from 1 to 4096"),
    (lambda: GhostBatchNorm1d(4, 0), "ghost_size"),
    (lambda: GhostBatchNorm1d(4, 3)(torch.zeros(8, 4)), "ghost_size"),
    (lambda: make_norm_data(1), "num_examples"),
])
def test_bad_input_names_the_parameter(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_every_norm_is_described():
    assert set(NORMS) == {"batch", "ghost_batch", "layer", "group", "batch_frozen"}


def test_notebook_sizes_pass_the_ceiling(before_allocating):
    x, y = make_norm_data(64, seed=0)  # notebook researcher_2's sizes, under the default ceiling
    assert x.shape == (64, 6) and compare_norm("batch", 4, num_examples=64, seed=0).norm == "batch"
