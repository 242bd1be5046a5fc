"""After the first update on one generation the PPO ratio leaves 1; advantages are statistics of whole groups. Float64."""
from __future__ import annotations

import torch

from widgets.core.config import check_float, check_int
from widgets.lessons.researcher_8.rl_losses import Completions, TinyPolicy


def group_advantages(rewards: torch.Tensor, completions_per_prompt: int, scale: bool = True) -> torch.Tensor:
    """(G,) rewards -> (G,) advantages: reward minus its group's mean, over the group's std when `scale`."""
    if not isinstance(rewards, torch.Tensor) or rewards.dim() != 1:
        raise TypeError("rewards must be a 1-d tensor, one reward per completion")
    n = check_int("completions_per_prompt", completions_per_prompt, 2, len(rewards))
    if len(rewards) % n:
        raise ValueError(f"completions_per_prompt must divide the {len(rewards)} rewards, got {n}")
    groups = rewards.view(-1, n)
    centred = groups - groups.mean(dim=1, keepdim=True)
    return (centred / groups.std(dim=1, keepdim=True) if scale else centred).reshape(-1)


def clipped_token_losses(policy: TinyPolicy, completions: Completions, old_log_probs: torch.Tensor,
                         eps: float = 0.2) -> tuple[torch.Tensor, torch.Tensor]:
    """(n, T) losses -min(r A, clip(r, 1 - eps, 1 + eps) A), r = pi / pi_old, and where the clip took over."""
    eps = check_float("eps", eps, 0.0, 1.0)
    ratio = torch.exp(policy(completions.features, completions.actions) - old_log_probs)
    advantages = completions.advantages[:, None]
    unclipped, clipped = ratio * advantages, ratio.clamp(1 - eps, 1 + eps) * advantages
    return -torch.minimum(unclipped, clipped), (clipped < unclipped) & (completions.mask > 0)
