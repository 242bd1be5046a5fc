"""RL losses (TRL's normalisers) under accumulation: only a count of the whole window, passed in, is exact. Float64."""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from widgets.core.accumulation import flat_grad, windows
from widgets.core.config import TENSOR_VIEW, check_int, check_memory

LOSS_TYPES = ("grpo", "bnpo", "dr_grpo", "dapo")
DTYPE = torch.float64
RTOL, ATOL = 1e-9, 1e-12  # float64: far above rounding, far below any normaliser mistake


@dataclass(frozen=True)
class Completions:
    """G completions right-padded to T: features (G, T, d), actions (G, T), mask (G, T), advantages (G,)."""

    features: torch.Tensor
    actions: torch.Tensor
    mask: torch.Tensor
    advantages: torch.Tensor

    @property
    def max_len(self) -> int:
        return self.mask.shape[1]

    @property
    def lengths(self) -> list[int]:
        return [int(n) for n in self.mask.sum(dim=1)]

    def __len__(self) -> int:
        return self.mask.shape[0]

    def part(self, index) -> "Completions":
        return Completions(self.features[index], self.actions[index], self.mask[index], self.advantages[index])


def make_completions(num_completions: int = 24, completions_per_prompt: int = 4, max_len: int = 16,
                     min_len: int = 2, dim: int = 6, vocab_size: int = 5, seed: int = 0) -> Completions:
    """Completions of uniform lengths, `completions_per_prompt` per prompt, with group-normalised advantages."""
    check_int("num_completions", num_completions, 1, 4096)
    check_int("completions_per_prompt", completions_per_prompt, 2, num_completions)
    if num_completions % completions_per_prompt:
        raise ValueError(f"completions_per_prompt must divide num_completions ({num_completions}), "
                         f"got {completions_per_prompt}")
    check_int("max_len", max_len, 1, 4096)
    check_int("min_len", min_len, 1, max_len)
    check_int("dim", dim, 1, 256)
    check_int("vocab_size", vocab_size, 2, 1000)
    check_int("seed", seed, 0, 2**31 - 1)
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(min_len, max_len + 1, (num_completions,), generator=g)
    mask = (torch.arange(max_len) < lengths[:, None]).to(DTYPE)
    features = torch.randn(num_completions, max_len, dim, generator=g, dtype=DTYPE)
    actions = torch.randint(vocab_size, (num_completions, max_len), generator=g)
    rewards = torch.randn(num_completions // completions_per_prompt, completions_per_prompt, generator=g, dtype=DTYPE)
    advantages = (rewards - rewards.mean(1, keepdim=True)) / rewards.std(1, keepdim=True)
    return Completions(features, actions, mask, advantages.reshape(-1))


class TinyPolicy(torch.nn.Module):
    """A linear softmax policy: token log-probs log pi(a_t | x_t) from features (n, T, d) -> (n, T)."""

    def __init__(self, dim: int = 6, vocab_size: int = 5, seed: int = 0):
        super().__init__()
        check_int("seed", seed, 0, 2**31 - 1)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            self.head = torch.nn.Linear(check_int("dim", dim, 1, 256), check_int("vocab_size", vocab_size, 2, 1000))
        self.to(DTYPE)

    def forward(self, features: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        logp = torch.log_softmax(self.head(features), dim=-1)
        return logp.gather(-1, actions[..., None]).squeeze(-1)


def token_losses(policy: TinyPolicy, completions: Completions) -> torch.Tensor:
    """(n, T) per-token losses -A_i log pi(a_t): the surrogate's gradient at ratio 1 (padding included; masked later)."""
    return -completions.advantages[:, None] * policy(completions.features, completions.actions)


def micro_batch_loss(token_losses: torch.Tensor, mask: torch.Tensor, loss_type: str,
                     accumulation_steps: int,
                     max_len: int, window_tokens: float | None = None,
                     window_completions: float | None = None) -> torch.Tensor:
    """The loss one micro-batch sends to backward; a window count left None is guessed as K x this
    one's."""
    K = accumulation_steps
    summed = (token_losses * mask).sum(dim=1)  # each completion's summed token loss, (n,)
    lengths = mask.sum(dim=1)  # each completion's tokens
    completions = K * len(summed) if window_completions is None else window_completions
    if loss_type == "grpo":  # each completion's token mean, averaged over the window's completions
        return (summed / lengths).sum() / completions
    if loss_type == "dr_grpo":  # a constant per completion: the maximum completion length
        return summed.sum() / (completions * max_len)
    # this micro-batch's token mean, as if every micro-batch held as many tokens
    if loss_type == "bnpo":
        return summed.sum() / (K * lengths.sum())
    if loss_type == "dapo":  # the token mean over the whole window: its count passed in
        if window_tokens is None:
            raise ValueError("window_tokens must be given for dapo: the window's completion "
                             "tokens, a number > 0")
        return summed.sum() / window_tokens
    raise ValueError(f"loss_type must be one of {LOSS_TYPES}, got {loss_type!r}")


def partition(num_completions: int, accumulation_steps: int, devices: int = 1) -> list[list[torch.Tensor]]:
    """parts[rank][micro_step]: consecutive completion indices, split as evenly as they go."""
    for name, value in (("num_completions", num_completions), ("accumulation_steps", accumulation_steps),
                        ("devices", devices)):
        check_int(name, value, 1)
    check_memory(f"partition({num_completions}, {accumulation_steps}, {devices})",  # the indices, then K x D views
                 num_completions * 8 + accumulation_steps * devices * TENSOR_VIEW)
    parts = torch.arange(num_completions).tensor_split(accumulation_steps * devices)
    return [[parts[k * devices + r] for k in range(accumulation_steps)] for r in range(devices)]


def accumulated_policy_gradient(policy: TinyPolicy, completions: Completions, loss_type: str,
                                accumulation_steps: int, devices: int = 1, window_counts: bool = False) -> torch.Tensor:
    """The flat gradient of one update: `devices` ranks accumulate K micro-batches each, DDP averages."""
    K, D = accumulation_steps, devices
    tokens = float(completions.mask.sum()) / D  # counted before the first backward: what each rank divides by
    completions_per_rank = len(completions) / D if window_counts else None
    policy.zero_grad(set_to_none=True)
    for rank in partition(len(completions), K, D):
        for index in rank:
            part = completions.part(index)
            loss = micro_batch_loss(token_losses(policy, part), part.mask, loss_type, K, completions.max_len,
                                    window_tokens=tokens, window_completions=completions_per_rank)
            loss.backward()  # backward adds into .grad: every rank's pile, in one place
    grad = flat_grad(policy) / D  # DDP's all-reduce averages the ranks' piles
    policy.zero_grad(set_to_none=True)
    return grad


def token_weights(lengths: list[list[int]], loss_type: str, max_len: int, window_counts: bool = False) -> list[list[float]]:
    """Each token's weight per micro-batch (`lengths[k]`), written from the definitions (tests compare)."""
    if loss_type not in LOSS_TYPES:
        raise ValueError(f"loss_type must be one of {LOSS_TYPES}, got {loss_type!r}")
    K = len(lengths)
    window_n = sum(len(mb) for mb in lengths)
    window_t = sum(sum(mb) for mb in lengths)
    weights = []
    for mb in lengths:
        n = window_n if window_counts else K * len(mb)
        if loss_type == "grpo":
            weights.append([1 / (n * length) for length in mb])
        elif loss_type == "dr_grpo":
            weights.append([1 / (n * max_len)] * len(mb))
        elif loss_type == "bnpo":
            weights.append([1 / (K * sum(mb))] * len(mb))
        else:
            weights.append([1 / window_t] * len(mb))
    return weights


def invariance(policy: TinyPolicy, completions: Completions, loss_type: str, ks=(1, 2, 4, 8), devices: int = 1,
               window_counts: bool = False) -> dict[int, bool]:
    """The invariance oracle: for each K, is the update's gradient allclose to the one at K = 1, one device?"""
    if loss_type not in LOSS_TYPES:
        raise ValueError(f"loss_type must be one of {LOSS_TYPES}, got {loss_type!r}")
    check_int("devices", devices, 1, 64)
    for k in ks:
        check_int("accumulation_steps", k, 1, max(1, len(completions) // devices))
    truth = accumulated_policy_gradient(policy, completions, loss_type, 1, 1, window_counts)
    return {k: torch.allclose(accumulated_policy_gradient(policy, completions, loss_type, k, devices, window_counts),
                              truth, rtol=RTOL, atol=ATOL) for k in ks}


def generation_update_gradients(policy: TinyPolicy, completions: Completions, steps_per_generation: int,
                                accumulation_steps: int, normaliser: str) -> list[torch.Tensor]:
    """dapo's update gradients when a generation feeds more micro-steps than an update takes, per `normaliser`."""
    if normaliser not in ("generation", "window"):
        raise ValueError(f"normaliser must be 'generation' or 'window', got {normaliser!r}")
    S, K = check_int("steps_per_generation", steps_per_generation, 1), check_int("accumulation_steps", accumulation_steps, 1)
    micro_batches = math.lcm(S, K)  # whole generations and whole updates
    if micro_batches > len(completions):
        raise ValueError(f"lcm(steps_per_generation, accumulation_steps) = {micro_batches} micro-batches need at "
                         f"least as many completions, got {len(completions)}")
    parts = torch.arange(len(completions)).tensor_split(micro_batches)
    tokens = [float(completions.mask[p].sum()) for p in parts]
    grads = []
    for window in windows(len(parts), K):  # the micro-steps of each update (whole windows: lcm(S, K) of them)
        policy.zero_grad(set_to_none=True)
        for m in window:
            generation = m // S
            count = sum(tokens[generation * S:(generation + 1) * S]) if normaliser == "generation" \
                else sum(tokens[i] for i in window)
            part = completions.part(parts[m])
            loss = micro_batch_loss(token_losses(policy, part), part.mask, "dapo", K, completions.max_len,
                                    window_tokens=count)
            loss.backward()
        grads.append(flat_grad(policy))
    policy.zero_grad(set_to_none=True)
    return grads


def window_token_mean_gradient(policy: TinyPolicy, completions: Completions) -> torch.Tensor:
    """Oracle: one backward of the token mean over `completions` (all of one update), plain autograd."""
    policy.zero_grad(set_to_none=True)
    losses = token_losses(policy, completions)
    ((losses * completions.mask).sum() / completions.mask.sum()).backward()
    grad = flat_grad(policy)
    policy.zero_grad(set_to_none=True)
    return grad
