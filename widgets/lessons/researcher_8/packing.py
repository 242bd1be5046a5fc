"""Completions packed into rows: which normalisers survive packing, and what attention across documents costs. Float64."""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from widgets.core.accumulation import flat_grad
from widgets.core.config import check_int, check_memory
from widgets.lessons.researcher_8.rl_losses import DTYPE, LOSS_TYPES, Completions, micro_batch_loss


@dataclass(frozen=True)
class Rows:
    """R rows of `capacity` tokens: doc (R, C) the completion each token comes from (-1: padding) and
    position (R, C) the token's place inside that completion."""

    doc: torch.Tensor
    position: torch.Tensor

    @property
    def mask(self) -> torch.Tensor:
        return (self.doc >= 0).to(DTYPE)

    def __len__(self) -> int:
        return self.doc.shape[0]


def lay_out(rows: list[list[int]], lengths: list[int], capacity: int) -> Rows:
    """Rows holding the completions `rows[r]` one after another, right-padded to `capacity` tokens."""
    check_int("capacity", capacity, 1, 4096)
    check_memory(f"lay_out({len(rows)} rows, capacity {capacity})", 2 * 8 * len(rows) * capacity)
    doc = torch.full((len(rows), capacity), -1)
    position = torch.zeros((len(rows), capacity), dtype=torch.long)
    for r, row in enumerate(rows):
        start = 0
        for i in row:
            if start + lengths[i] > capacity:
                raise ValueError(f"capacity must hold each row's completions ({sum(lengths[j] for j in row)} "
                                 f"tokens in row {r}), got {capacity}")
            doc[r, start:start + lengths[i]] = i
            position[r, start:start + lengths[i]] = torch.arange(lengths[i])
            start += lengths[i]
    return Rows(doc, position)


def pack(lengths: list[int], capacity: int) -> list[list[int]]:
    """Next-fit in order: each completion joins the current row if it fits, else starts the next one."""
    check_int("capacity", capacity, max(lengths), 4096)
    rows, used = [[]], 0
    for i, n in enumerate(lengths):
        if used + n > capacity:
            rows, used = rows + [[]], 0
        rows[-1].append(i)
        used += n
    return rows


def sinusoid(position: torch.Tensor, dim: int) -> torch.Tensor:
    """(..., dim) fixed sine/cosine features of each position, as in the Transformer: no parameters."""
    freq = torch.exp(-math.log(100.0) * torch.arange(0, dim, 2, dtype=DTYPE) / dim)
    angle = position[..., None].to(DTYPE) * freq
    return torch.cat([angle.sin(), angle.cos()], dim=-1)[..., :dim]


class AttentionPolicy(torch.nn.Module):
    """One causal attention layer and a softmax head: token log-probs (R, C) that depend on the tokens before.
    Its sizes are `make_completions`' defaults (6 features, 5 actions)."""

    dim, vocab_size = 6, 5

    def __init__(self, seed: int = 0):
        super().__init__()
        check_int("seed", seed, 0, 2**31 - 1)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            self.qkv = torch.nn.Linear(self.dim, 3 * self.dim)
            self.head = torch.nn.Linear(self.dim, self.vocab_size)
        self.to(DTYPE)

    def forward(self, features: torch.Tensor, actions: torch.Tensor, rows: Rows, per_document: bool) -> torch.Tensor:
        C = rows.doc.shape[1]
        # per-document attention: positions restart at each completion and a token sees its own completion only
        # (a block-diagonal causal mask); without it the row is one long sequence, positions 0..C-1
        position = rows.position if per_document else torch.arange(C).expand_as(rows.doc)
        h = features + sinusoid(position, self.dim)
        q, k, v = self.qkv(h).chunk(3, dim=-1)
        seen = rows.doc[:, :, None] == rows.doc[:, None, :] if per_document else rows.doc[:, None, :] >= 0
        allowed = (seen & torch.ones(C, C, dtype=torch.bool).tril()) | torch.eye(C, dtype=torch.bool)
        scores = (q @ k.transpose(1, 2) / math.sqrt(self.dim)).masked_fill(~allowed, -math.inf)
        logp = torch.log_softmax(self.head(h + scores.softmax(dim=-1) @ v), dim=-1)
        return logp.gather(-1, actions[..., None]).squeeze(-1)


def row_token_losses(policy: AttentionPolicy, completions: Completions, rows: Rows, per_document: bool) -> torch.Tensor:
    """(R, C) token losses -A log pi(a_t) of the completions laid out in `rows` (0 on padding)."""
    real = rows.doc >= 0
    doc, position = rows.doc.clamp(min=0), rows.position
    features = completions.features[doc, position] * real[..., None]
    advantages = completions.advantages[doc] * real
    return -advantages * policy(features, completions.actions[doc, position], rows, per_document)


def unpack(values: torch.Tensor, rows: Rows, completions: Completions) -> torch.Tensor:
    """(R, C) per-token values back to (G, T), one completion per row: the segment ids' scatter (tunix PR #1662)."""
    out = torch.zeros(completions.mask.shape, dtype=values.dtype)
    real = rows.doc >= 0
    return out.index_put((rows.doc[real], rows.position[real]), values[real])


def packed_gradient(policy: AttentionPolicy, completions: Completions, rows: Rows, loss_type: str,
                    per_document: bool, by_completion: bool = False) -> torch.Tensor:
    """The flat gradient of the notebook's `micro_batch_loss` (K = 1) on `rows`: each row taken as a sequence,
    or, `by_completion`, the token losses unpacked to one completion per row first."""
    if loss_type not in LOSS_TYPES:
        raise ValueError(f"loss_type must be one of {LOSS_TYPES}, got {loss_type!r}")
    policy.zero_grad(set_to_none=True)
    losses, mask = row_token_losses(policy, completions, rows, per_document), rows.mask
    if by_completion:
        losses, mask = unpack(losses, rows, completions), completions.mask
    # max_len stays the configured completion length: a trainer's dr_grpo constant does not know about packing
    micro_batch_loss(losses, mask, loss_type, 1, completions.max_len, window_tokens=float(mask.sum())).backward()
    grad = flat_grad(policy)
    policy.zero_grad(set_to_none=True)
    return grad
