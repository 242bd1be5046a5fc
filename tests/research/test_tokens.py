"""Token-count normalisation: the per-micro-batch mean fails allclose against one big batch, the window normaliser passes.

The oracle is written here independently: plain cross_entropy(ignore_index, reduction="mean") over the whole window.
"""
import pytest
import torch

from widgets.core.accumulation import real_tokens
from widgets.research.tokens import (
    IGNORE_INDEX,
    TinyCausalLM,
    accumulate_window,
    accumulated_token_gradient,
    big_batch_token_gradient,
    gap_against_spread,
    make_token_batch,
    normaliser_gap,
    split_window,
)

SEEDS = (0, 2, 3)
KS = (2, 4, 8)


def oracle(model, batch, class_weights=None):
    """The window's mean token loss and its gradient, by plain autograd in one pass."""
    model.zero_grad(set_to_none=True)
    logits = model(batch.inputs)
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), batch.labels.reshape(-1),
                                             weight=class_weights, ignore_index=IGNORE_INDEX)
    loss.backward()
    grad = torch.cat([p.grad.reshape(-1) for p in model.parameters()]).detach().clone()
    model.zero_grad(set_to_none=True)
    return float(loss.detach()), grad


def close(a, b):
    return torch.allclose(a, b, rtol=1e-7, atol=1e-10)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("K", KS)
def test_per_micro_batch_mean_breaks_and_window_fixes(seed, K):
    batch = make_token_batch(16, 20, 0.9, seed=seed)
    model = TinyCausalLM(seed=seed)
    loss, grad = oracle(model, batch)
    reference = big_batch_token_gradient(model, batch)
    assert close(reference.grad, grad) and reference.loss == pytest.approx(loss, rel=1e-12)
    bug = accumulated_token_gradient(model, batch, K, "per_micro_batch")
    fix = accumulated_token_gradient(model, batch, K, "window")
    counts = [real_tokens(batch.labels[s]) for s in split_window(batch, K)]
    assert len(set(counts)) > 1, counts  # these seeds give unequal counts (see the test below for equal ones)
    assert not close(bug.grad, grad)
    assert close(fix.grad, grad)
    assert fix.loss == pytest.approx(loss, rel=1e-12)
    assert normaliser_gap(reference, bug).allclose is False
    assert normaliser_gap(reference, fix).allclose is True


def test_equal_token_counts_hide_the_bug_by_coincidence():
    """Seed 1, K = 2: both micro-batches hold 97 real tokens, so the per-micro-batch mean is exact there."""
    batch = make_token_batch(16, 20, 0.9, seed=1)
    assert [real_tokens(batch.labels[s]) for s in split_window(batch, 2)] == [97, 97]
    model = TinyCausalLM(seed=1)
    _, grad = oracle(model, batch)
    assert close(accumulated_token_gradient(model, batch, 2, "per_micro_batch").grad, grad)
    assert not close(accumulated_token_gradient(model, batch, 4, "per_micro_batch").grad, grad)


@pytest.mark.parametrize("seed", SEEDS)
def test_without_padding_the_bug_is_invisible(seed):
    """Equal token counts per micro-batch: the per-micro-batch mean happens to be exact."""
    batch = make_token_batch(16, 20, 0.0, seed=seed)
    assert set(batch.lengths) == {20}
    model = TinyCausalLM(seed=seed)
    _, grad = oracle(model, batch)
    assert close(accumulated_token_gradient(model, batch, 4, "per_micro_batch").grad, grad)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("K", KS)
def test_class_weights_follow_the_same_rule(seed, K):
    batch = make_token_batch(16, 20, 0.0, seed=seed)  # no padding: only the weights differ
    model = TinyCausalLM(seed=seed)
    weights = 0.2 + 2 * torch.rand(12, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    _, grad = oracle(model, batch, weights)
    micro_batches = [(batch.inputs[s], batch.labels[s]) for s in split_window(batch, K)]
    for normaliser, exact in (("per_micro_batch", False), ("window", True)):
        model.zero_grad(set_to_none=True)
        accumulate_window(model, micro_batches, normaliser, weights)
        assert close(torch.cat([p.grad.reshape(-1) for p in model.parameters()]), grad) is exact


def test_batch_shape_padding_and_counts():
    batch = make_token_batch(8, 10, 1.0, seed=4)
    assert batch.inputs.shape == batch.labels.shape == (8, 10)
    for row, n in zip(batch.labels, batch.lengths):
        assert 2 <= n <= 10
        assert (row[n:] == IGNORE_INDEX).all() and (row[:n] != IGNORE_INDEX).all()
    assert real_tokens(batch.labels) == sum(batch.lengths)
    assert [s.stop - s.start for s in split_window(batch, 4)] == [2, 2, 2, 2]


def test_gap_grows_with_spread_and_window_stays_at_rounding():
    calls = []
    gaps = gap_against_spread([0.0, 0.5, 1.0], accumulation_steps=4, seeds=(0, 1),
                              progress=lambda xs: calls.append(len(xs)) or xs)
    assert calls == [3]
    bug = gaps["per_micro_batch"]
    assert bug[0] < 1e-12 < bug[1] < bug[2]
    assert max(gaps["window"]) < 1e-12


@pytest.mark.parametrize("call, match", [
    (lambda: make_token_batch(0), "num_sequences"),
    (lambda: make_token_batch(4, 2), "max_len"),
    (lambda: make_token_batch(4, 8, 1.5), "length_spread"),
    (lambda: TinyCausalLM(vocab_size=1), "vocab_size"),
    (lambda: split_window(make_token_batch(6), 4), "accumulation_steps must divide"),
    (lambda: split_window(make_token_batch(4), 8), "accumulation_steps"),
    (lambda: big_batch_token_gradient(TinyCausalLM(), make_token_batch(4), torch.ones(3)), "class_weights"),
    (lambda: big_batch_token_gradient(TinyCausalLM(), make_token_batch(4), -torch.ones(12)), "class_weights"),
    (lambda: gap_against_spread([]), "spreads"),
    (lambda: gap_against_spread([0.5], seeds=()), "seeds"),
])
def test_bad_input_names_the_parameter(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_wrong_types_are_refused_by_name():
    with pytest.raises(TypeError, match="batch"):
        big_batch_token_gradient(TinyCausalLM(), "not a batch")
    with pytest.raises(TypeError, match="reference"):
        normaliser_gap(None, None)
    batch = make_token_batch(4)
    from widgets.research.tokens import token_loss_sum
    with pytest.raises(ValueError, match="labels must have the shape"):
        token_loss_sum(TinyCausalLM(), batch.inputs, batch.labels[:, :3])


def test_sizes_past_the_ceiling_are_refused_before_allocating(before_allocating, monkeypatch):
    from widgets.core.config import BudgetError
    monkeypatch.setenv("LAB_MEMORY_LIMIT_MB", "100")  # the largest batch (384 MB) fits the default ceiling only
    with before_allocating(), pytest.raises(BudgetError, match=r"make_token_batch\(num_sequences=4096, max_len=4096\) "
                                            r"would need about 384 MB, over this lab's limit of 100 MB"):
        make_token_batch(num_sequences=4096, max_len=4096)


def test_notebook_sizes_pass_the_ceiling(before_allocating):
    batch = make_token_batch(num_sequences=16, max_len=24, length_spread=0.8, seed=0)  # researcher_1's sizes
    assert batch.inputs.shape == (16, 24) and TinyCausalLM(seed=0).vocab_size == 12


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("K", KS)
def test_token_sums_then_grad_scaled_after_the_last_backward_is_the_window_mean(seed, K):
    """torchtune's order: back-propagate token-loss sums, count the tokens as they come, divide .grad at the end.

    The count need not be known before the first backward (researcher_1 shows this on one window).
    """
    batch = make_token_batch(16, 20, 0.9, seed=seed)
    model = TinyCausalLM(seed=seed)
    _, grad = oracle(model, batch)
    n_total = 0
    for s in split_window(batch, K):
        logits = model(batch.inputs[s])
        torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), batch.labels[s].reshape(-1),
                                          ignore_index=IGNORE_INDEX, reduction="sum").backward()
        n_total += real_tokens(batch.labels[s])
    for p in model.parameters():
        p.grad /= n_total
    assert close(torch.cat([p.grad.reshape(-1) for p in model.parameters()]), grad)
