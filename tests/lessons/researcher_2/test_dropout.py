"""Dropout: global-generator masks break bit-equality with two dropout layers; per-example masks restore it."""
import pytest
import torch

from widgets.lessons.researcher_2.dropout import DropoutMLP, dropout_gradients, mean_gap_over_draws

SEEDS = (0, 1, 2)
KS = (2, 4, 8)


def close(a, b):
    return torch.allclose(a, b, rtol=1e-7, atol=1e-10)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("K", KS)
def test_global_masks_break_and_per_example_masks_fix(seed, K):
    big, acc = dropout_gradients("global", K, seed=seed, rng_seed=seed)
    assert not close(big, acc)
    big, acc = dropout_gradients("per_example", K, seed=seed, rng_seed=seed)
    assert close(big, acc)


@pytest.mark.parametrize("K", KS)
def test_without_dropout_accumulation_is_exact(K):
    model = DropoutMLP(p=0.0)
    x = torch.randn(32, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    y = x.sum(dim=1, keepdim=True)
    mse = torch.nn.functional.mse_loss
    mse(model(x), y).backward()
    big = torch.cat([p.grad.reshape(-1) for p in model.parameters()]).clone()
    model.zero_grad()
    for xs, ys in zip(x.chunk(K), y.chunk(K)):
        (mse(model(xs), ys) / K).backward()
    assert close(big, torch.cat([p.grad.reshape(-1) for p in model.parameters()]))


def test_per_example_mask_depends_on_the_example_only():
    model = DropoutMLP(mask_source="per_example")
    ids = torch.arange(6)
    whole = model.example_masks(ids, 32)
    assert torch.equal(whole[2:4], model.example_masks(ids[2:4], 32))
    assert 0.3 < float(whole.mean()) < 0.7  # p = 0.5


def test_per_example_masks_are_fresh_every_update_and_exact_within_one():
    model = DropoutMLP(mask_source="per_example")
    ids = torch.arange(8)
    step_3 = model.example_masks(ids, 32, step=3)
    assert not torch.equal(step_3, model.example_masks(ids, 32, step=4))  # a new update, new masks
    assert not torch.equal(step_3[0], step_3[1])  # each example its own
    assert torch.equal(step_3[4:], model.example_masks(ids[4:], 32, step=3))  # whichever micro-batch holds it
    x = torch.randn(8, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    whole = model(x, ids, step=3)
    assert torch.equal(whole[4:], model(x[4:], ids[4:], step=3))
    with pytest.raises(ValueError, match="step"):
        model(x, ids, step=-1)


def test_means_over_draws_approach_each_other():
    gaps = [mean_gap_over_draws(4, d) for d in (1, 64)]
    assert gaps[1] < gaps[0] / 3


@pytest.mark.parametrize("call, match", [
    (lambda: DropoutMLP(p=1.0), "p must be below 1"),
    (lambda: DropoutMLP(p=1.5), "p"),
    (lambda: DropoutMLP(mask_source="cuda"), "mask_source"),
    (lambda: DropoutMLP(dropout_layers=0), "dropout_layers"),
    (lambda: DropoutMLP(mask_source="per_example")(torch.zeros(3, 4, dtype=torch.float64)), "example_ids"),
    (lambda: dropout_gradients("global", 64), "accumulation_steps"),
    (lambda: dropout_gradients("global", 3), "accumulation_steps must divide"),
    (lambda: mean_gap_over_draws(4, 0), "draws"),
])
def test_bad_input_names_the_parameter(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_notebook_sizes_pass_the_ceiling(before_allocating):
    big, accumulated = dropout_gradients("global", 4, num_examples=32, seed=0, rng_seed=0, dropout_layers=2)
    assert big.shape == accumulated.shape  # notebook researcher_2's sizes, under the default ceiling


def test_too_many_draws_are_refused_before_the_first(before_allocating, monkeypatch):
    from widgets.core.config import BudgetError
    from widgets.lessons.researcher_2 import dropout
    with monkeypatch.context() as patch, pytest.raises(
            BudgetError, match=r"mean_gap_over_draws\(accumulation_steps=4, draws=100000, num_examples=32\) "
                               r"would run about 1013 s, over this lab's limit of 300 s"):
        patch.setattr(dropout, "_update", lambda *args: pytest.fail("a draw ran before the time check"))
        mean_gap_over_draws(4, 100_000, num_examples=32)
    assert mean_gap_over_draws(4, 100, num_examples=32, seed=0) < 1  # notebook researcher_2's largest: 1 s estimated
