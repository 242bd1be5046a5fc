"""The auditor's RL-loss problem: -A log p over completions of varied length, with GRPO's group advantages.

The right normaliser is DAPO's (Yu et al. (2025), arXiv:2503.14476): the completion tokens of the
whole window, so a token weighs the same wherever it sits; TRL's per-micro-batch "bnpo" does not.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from widgets.core.accumulation import IGNORE_INDEX

def window_readings(n: int, K: int, items: int, window: int, positions: int, all_positions: int,
                    per_micro_batch: str, also: dict[str, list[float]] | None = None) -> dict[str | None, list[float]]:
    """Each mistake's factor c on a micro-batch of `items` (`positions` with the padding) in a window of n
    micro-batches holding `window` items (`all_positions`), for the token and RL problems; None: 1 / window."""
    return {
        None: [1 / window],
        per_micro_batch: [1 / (n * items), 1 / (K * items)],  # its own count, then / n (or / K)
        **(also or {}),
        "loss_not_divided": [1 / items],
        "padding_counted": [1 / (n * positions), 1 / (K * positions), 1 / positions, 1 / all_positions],
        "loss_divided_twice": [1 / (n * window), 1 / (K * window), items / window**2],
        "loss_sum_reduction": [1.0, 1 / n, 1 / K],
    }


def describe_window_factors(u: int, factors: list, window_items: dict[int, int], items: str, loss: str) -> str:
    """What the first micro-batch of update u was divided by, against the window's count of `items`."""
    j, c = factors[0].batch, factors[0].factor
    window = sum(window_items.values())
    return f"micro-batch {j} of update {u} ({window_items[j]} {items}; the window holds {window}) " \
           f"had its {loss} divided by {1 / c:.4g}, so each of its tokens weighs {c * window:.3g} x its share 1/{window}"


FEATURES = 4  # features per position, what the policy reads
ACTIONS = 5  # the policy's vocabulary
COMPLETION_LENGTH = 8  # the padded completion length T
GROUP_SIZE = 6  # G completions per prompt, over which the rewards are normalised
COMPLETIONS_PER_MICRO_BATCH = 3  # b, the last micro-batch short_size(b)


@dataclass(frozen=True)
class Completions:
    """The targets of one micro-batch of completions."""

    tokens: torch.Tensor  # (b, T) the sampled tokens, IGNORE_INDEX at the padding
    advantages: torch.Tensor  # (b,)

    @property
    def mask(self) -> torch.Tensor:
        return self.tokens != IGNORE_INDEX

    def clone(self) -> "Completions":
        return Completions(self.tokens.clone(), self.advantages.clone())

    def __len__(self) -> int:
        return len(self.tokens)


def completion_tokens(targets: Completions) -> int:
    """The completion tokens of a micro-batch (the padding left out): what DAPO's normaliser counts."""
    return int(targets.mask.sum())


def policy_gradient_loss(logits: torch.Tensor, targets: Completions, reduction: str = "mean") -> torch.Tensor:
    """-A * log p(token), summed over the completion tokens of logits (b, T, V). reduction="mean"
    divides by this micro-batch's completion tokens; "sum" leaves the dividing to you."""
    if reduction not in ("mean", "sum"):
        raise ValueError(f"reduction must be 'mean' or 'sum', got {reduction!r}")
    logp = logits.log_softmax(-1).gather(-1, targets.tokens.clamp(min=0).unsqueeze(-1)).squeeze(-1)
    per_token = -targets.advantages.unsqueeze(1) * logp * targets.mask
    total = per_token.sum()
    return total / completion_tokens(targets) if reduction == "mean" else total


def sequence_mean(summed_gradient: torch.Tensor, targets: Completions) -> torch.Tensor:
    """GRPO's per-sequence mean: each completion's gradient of the summed loss divided by its own length."""
    return summed_gradient / targets.mask.sum(1).clamp(min=1).to(summed_gradient.dtype).reshape(-1, 1, 1)


class Policy:
    """The RL task: `Problem.task` for problem="rl", read like the token task."""

    name, unit, per_item, counted = "rl", "completions", "-A log p token losses", "completion tokens"

    @staticmethod
    def new_model() -> torch.nn.Module:
        return torch.nn.utils.skip_init(torch.nn.Linear, FEATURES, ACTIONS, bias=False, dtype=torch.float64)

    loss_fn = staticmethod(policy_gradient_loss)
    items = staticmethod(completion_tokens)
    shapes = {"grpo_sequence_mean": sequence_mean}  # the summed loss's gradient -> this shape's

    @staticmethod
    def describe_shape(u: int, j: int, targets: Completions) -> str:
        lengths = [int(n) for n in targets.mask.sum(1)]
        short, long = min(lengths), max(lengths)
        return f"micro-batch {j} of update {u} averaged each completion over its own tokens ({lengths}): a token " \
               f"of its {short}-token completion weighs {long / short:.3g} x one of its {long}-token completion"

    @staticmethod
    def readings(targets: Completions, window: list[Completions], K: int) -> dict[str | None, list[float]]:
        """Each mistake's factor c on one micro-batch's summed loss (`targets`), in a window of n
        micro-batches (`window`; None, the right one: 1 / the window's completion tokens)."""
        n, items, total = len(window), completion_tokens(targets), sum(completion_tokens(t) for t in window)
        positions, all_positions = targets.tokens.numel(), sum(t.tokens.numel() for t in window)
        return window_readings(n, K, items, total, positions, all_positions, "per_micro_batch_normaliser",  # bnpo
                               also={"divided_by_group_twice": [1 / (total * GROUP_SIZE)]})

    @staticmethod
    def describe_factors(u: int, factors: list, window_items: dict[int, int]) -> str:
        return describe_window_factors(u, factors, window_items, "completion tokens", "summed -A log p")


def completion_batches(num_batches: int, last_rows: int, g: torch.Generator) -> list[tuple[torch.Tensor, Completions]]:
    """Micro-batches of (features (b, T, FEATURES), Completions), the last of `last_rows` completions.
    Short and long micro-batches alternate, so the token counts differ inside every window."""
    b = COMPLETIONS_PER_MICRO_BATCH
    rows = [b] * (num_batches - 1) + [last_rows]
    total = sum(rows)
    behaviour = torch.randn(ACTIONS, FEATURES, generator=g, dtype=torch.float64)  # the policy that sampled them
    generated = math.ceil(total / GROUP_SIZE) * GROUP_SIZE  # whole groups; the loop sees the first `total`
    rewards = torch.randn(generated, generator=g, dtype=torch.float64)
    grouped = rewards.reshape(-1, GROUP_SIZE)
    advantages = ((grouped - grouped.mean(1, keepdim=True)) / (grouped.std(1, keepdim=True) + 1e-4)).reshape(-1)
    batches, start = [], 0
    for j, m in enumerate(rows):
        short = j % 2 == 0
        lengths = torch.randint(1, COMPLETION_LENGTH // 2 + 1, (m,), generator=g) + (0 if short else
                                                                                     COMPLETION_LENGTH // 2)
        real = torch.arange(COMPLETION_LENGTH) < lengths.unsqueeze(1)
        features = torch.randn(m, COMPLETION_LENGTH, FEATURES, generator=g, dtype=torch.float64) * real.unsqueeze(-1)
        probs = F.linear(features, behaviour).softmax(-1).reshape(-1, ACTIONS)
        sampled = torch.multinomial(probs, 1, generator=g).reshape(m, COMPLETION_LENGTH)
        tokens = torch.where(real, sampled, IGNORE_INDEX)
        batches.append((features, Completions(tokens, advantages[start : start + m].clone())))
        start += m
    return batches
