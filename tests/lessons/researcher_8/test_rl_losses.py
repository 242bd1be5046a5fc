"""RL loss types under accumulation: each break is a failing invariance oracle, each fix a passing one.
Oracles: the gradient at K = 1 on one device (the same gradient for every K), plain autograd of the
window's token mean, and `token_weights`, the weights written from the definitions."""
import math

import pytest
import torch

from widgets.lessons.researcher_8.rl_losses import (
    LOSS_TYPES, RTOL, ATOL, TinyPolicy, accumulated_policy_gradient, generation_update_gradients, invariance,
    make_completions, micro_batch_loss, partition, token_losses, token_weights, window_token_mean_gradient,
)

SEEDS = (0, 1, 2)
KS = (1, 2, 4, 8)


def close(a, b):
    return torch.allclose(a, b, rtol=RTOL, atol=ATOL)


def weighted_gradient(policy, completions, weights):
    """Oracle: one backward of sum_i w_i sum_t loss_it, with w from `token_weights`."""
    policy.zero_grad(set_to_none=True)
    w = torch.tensor(weights, dtype=torch.float64)
    (w[:, None] * token_losses(policy, completions) * completions.mask).sum().backward()
    grad = torch.cat([p.grad.reshape(-1) for p in policy.parameters()]).clone()
    policy.zero_grad(set_to_none=True)
    return grad


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("loss_type", LOSS_TYPES)
@pytest.mark.parametrize("K", KS)
@pytest.mark.parametrize("window_counts", [False, True])
def test_the_pile_is_the_weighted_sum_the_definitions_give(seed, loss_type, K, window_counts):
    c, policy = make_completions(num_completions=20, seed=seed), TinyPolicy(seed=seed)
    lengths = [[c.lengths[int(i)] for i in part] for part in partition(len(c), K)[0]]
    weights = [w for mb in token_weights(lengths, loss_type, c.max_len, window_counts) for w in mb]
    assert close(accumulated_policy_gradient(policy, c, loss_type, K, window_counts=window_counts),
                 weighted_gradient(policy, c, weights))


@pytest.mark.parametrize("seed", SEEDS)
def test_invariance_oracle_equal_micro_batches(seed):
    c, policy = make_completions(num_completions=24, seed=seed), TinyPolicy(seed=seed)
    for loss_type in ("grpo", "dr_grpo", "dapo"):  # same completions per micro-batch: these survive
        assert invariance(policy, c, loss_type, KS) == {k: True for k in KS}, loss_type
    assert invariance(policy, c, "bnpo", KS) == {1: True, 2: False, 4: False, 8: False}  # the break


@pytest.mark.parametrize("seed", SEEDS)
def test_uneven_micro_batches_break_grpo_and_a_window_count_fixes_it(seed):
    c, policy = make_completions(num_completions=20, seed=seed), TinyPolicy(seed=seed)  # K = 8: sizes 3,3,3,3,2,2,2,2
    for loss_type in ("grpo", "dr_grpo"):
        assert invariance(policy, c, loss_type, KS) == {1: True, 2: True, 4: True, 8: False}
        assert invariance(policy, c, loss_type, KS, window_counts=True) == {k: True for k in KS}


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("K", KS)
def test_dapo_is_the_window_token_mean_on_any_devices(seed, K):
    c, policy = make_completions(num_completions=24, seed=seed), TinyPolicy(seed=seed)
    truth = window_token_mean_gradient(policy, c)
    for devices in (1, 2, 3):
        if K * devices <= 24:
            assert close(accumulated_policy_gradient(policy, c, "dapo", K, devices), truth)
    assert not close(accumulated_policy_gradient(policy, c, "bnpo", max(K, 2), 1), truth)


def test_devices_break_bnpo_even_at_k_1():
    c, policy = make_completions(seed=0), TinyPolicy(seed=0)
    assert invariance(policy, c, "bnpo", (1, 2), devices=2) == {1: False, 2: False}


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("S, K", [(4, 2), (8, 2), (2, 4), (2, 8), (4, 4)])
def test_steps_per_generation_not_equal_to_k_fails_and_the_window_count_fixes_it(seed, S, K):
    c, policy = make_completions(num_completions=24, seed=seed), TinyPolicy(seed=seed)
    parts = torch.arange(len(c)).tensor_split(math.lcm(S, K))
    oracles = [window_token_mean_gradient(policy, c.part(torch.cat(parts[s:s + K]))) for s in range(0, len(parts), K)]
    fixed = generation_update_gradients(policy, c, S, K, "window")
    buggy = generation_update_gradients(policy, c, S, K, "generation")
    assert all(close(g, o) for g, o in zip(fixed, oracles))
    assert all(close(g, o) for g, o in zip(buggy, oracles)) == (S == K)
    if S > K:  # one generation, several updates: each update's pile is the right one x its share of the tokens
        for s, (g, o) in zip(range(0, len(parts), K), zip(buggy, oracles)):
            share = float(c.mask[torch.cat(parts[s:s + K])].sum() / c.mask.sum())
            assert close(g, share * o)


def test_micro_batch_loss_matches_trl_formulas_at_k_1():
    c, policy = make_completions(seed=3), TinyPolicy(seed=3)
    losses, mask = token_losses(policy, c), c.mask
    expected = {
        "grpo": ((losses * mask).sum(-1) / mask.sum(-1)).mean(),
        "bnpo": (losses * mask).sum() / mask.sum(),
        "dr_grpo": (losses * mask).sum() / (losses.size(0) * c.max_len),
        "dapo": (losses * mask).sum() / mask.sum(),
    }
    for loss_type, value in expected.items():
        got = micro_batch_loss(losses, mask, loss_type, 1, c.max_len, window_tokens=float(mask.sum()))
        assert torch.allclose(got, value, rtol=1e-12)


def test_bad_input_names_the_parameter():
    c, policy = make_completions(seed=0), TinyPolicy(seed=0)
    with pytest.raises(ValueError, match="loss_type"):
        invariance(policy, c, "ppo")
    with pytest.raises(ValueError, match="accumulation_steps"):
        invariance(policy, c, "grpo", (1, 25))
    with pytest.raises(ValueError, match="normaliser"):
        generation_update_gradients(policy, c, 2, 2, "batch")
    with pytest.raises(ValueError, match="completions_per_prompt"):
        make_completions(num_completions=10, completions_per_prompt=4)
    with pytest.raises(ValueError, match="loss_type"):
        token_weights([[2, 3]], "ppo", 16)
    with pytest.raises(ValueError, match="window_tokens"):
        micro_batch_loss(token_losses(policy, c), c.mask, "dapo", 2, c.max_len)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("K", [2, 4, 8])
def test_dapo_divided_by_k_again_is_1_over_k_of_the_update(seed, K):
    """ms-swift #10117: a window-normalised loss divided by K once more (the notebook's cell, written out)."""
    c, policy = make_completions(seed=seed), TinyPolicy(seed=seed)
    truth = window_token_mean_gradient(policy, c)
    policy.zero_grad(set_to_none=True)
    for index in torch.arange(len(c)).tensor_split(K):
        part = c.part(index)
        loss = micro_batch_loss(token_losses(policy, part), part.mask, "dapo", K, c.max_len,
                                window_tokens=float(c.mask.sum()))
        (loss / K).backward()
    pile = torch.cat([p.grad.reshape(-1) for p in policy.parameters()])
    assert not close(pile, truth) and close(pile, truth / K)
