"""researcher_8's off-policy pieces: advantages of whole groups, PPO's clipped surrogate and what it silences."""
import pytest
import torch

from widgets.lessons.researcher_8.off_policy import clipped_token_losses, group_advantages
from widgets.lessons.researcher_8.rl_losses import TinyPolicy, make_completions, token_losses


def test_group_advantages_are_each_groups_standard_scores():
    rewards = torch.randn(12, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    a = group_advantages(rewards, 4).view(3, 4)
    assert torch.allclose(a.mean(1), torch.zeros(3, dtype=a.dtype), atol=1e-12)
    assert torch.allclose(a.std(1), torch.ones(3, dtype=a.dtype))
    centred = group_advantages(rewards, 4, scale=False).view(3, 4)
    assert torch.allclose(centred, rewards.view(3, 4) - rewards.view(3, 4).mean(1, keepdim=True))
    with pytest.raises(ValueError, match="completions_per_prompt"):
        group_advantages(rewards, 5)
    with pytest.raises(TypeError, match="rewards"):
        group_advantages([1.0, 2.0], 2)


def test_at_ratio_one_nothing_is_clipped_and_the_gradient_is_the_policy_gradient():
    c, p = make_completions(seed=2), TinyPolicy(seed=2)
    old = p(c.features, c.actions).detach()
    loss, clipped = clipped_token_losses(p, c, old)
    assert not clipped.any()
    mine = torch.autograd.grad((loss * c.mask).sum(), list(p.parameters()))
    truth = torch.autograd.grad((token_losses(p, c) * c.mask).sum(), list(p.parameters()))
    assert all(torch.allclose(a, b) for a, b in zip(mine, truth))  # d/dθ (r A) = A d log pi at r = 1


def test_clipped_tokens_send_no_gradient_and_only_past_the_clip_range():
    c, p = make_completions(seed=0), TinyPolicy(seed=0)
    old = p(c.features, c.actions).detach()
    with torch.no_grad():
        for q in p.parameters():
            q.add_(0.5 * torch.randn(q.shape, generator=torch.Generator().manual_seed(3), dtype=q.dtype))
    loss, clipped = clipped_token_losses(p, c, old, eps=0.2)
    assert 0 < int(clipped.sum()) < int(c.mask.sum())
    grads = torch.autograd.grad((loss * clipped).sum(), list(p.parameters()))
    assert all(not g.any() for g in grads)
    with torch.no_grad():
        ratio = torch.exp(p(c.features, c.actions) - old)
    a = c.advantages[:, None].expand_as(ratio)
    assert bool(((ratio > 1.2) & (a > 0) | (ratio < 0.8) & (a < 0))[clipped].all())
    with pytest.raises(ValueError, match="eps"):
        clipped_token_losses(p, c, old, eps=2.0)
