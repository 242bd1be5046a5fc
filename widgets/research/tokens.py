"""Token-count normalisation: a mean of K micro-batches' token means is not the window's mean; the token-loss sum
over the window's real tokens is. Float64, so that a failed allclose is the normaliser and never rounding."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

import torch

from widgets.core.accumulation import IGNORE_INDEX, flat_grad
from widgets.core.config import check_float, check_int, check_memory

NORMALISERS = ("per_micro_batch", "window")
DTYPE = torch.float64
VOCAB = 12  # the token ids of `make_token_batch`, and `TinyCausalLM`'s default vocabulary


@dataclass(frozen=True)
class TokenBatch:
    """Padded sequences: `inputs` and `labels` are (n, T) integers; padded labels are IGNORE_INDEX."""

    inputs: torch.Tensor
    labels: torch.Tensor
    lengths: tuple[int, ...]  # real tokens per sequence, padding excluded

    @property
    def num_sequences(self) -> int:
        return self.inputs.shape[0]


def make_token_batch(num_sequences: int = 16, max_len: int = 24, length_spread: float = 0.8,
                     seed: int = 0) -> TokenBatch:
    """Noisy-rule sequences (next = 3 * prev + 1 mod 12, one in four random), right-padded; labels shift by one."""
    check_int("num_sequences", num_sequences, 1, 4096)
    check_int("max_len", max_len, 3, 4096)
    length_spread = check_float("length_spread", length_spread, 0.0, 1.0, low_inclusive=True)
    check_int("seed", seed, 0, 2**31 - 1)
    # int64 tokens (n, max_len + 1) and the inputs and labels copied out of them
    check_memory(f"make_token_batch(num_sequences={num_sequences}, max_len={max_len})",
                 3 * num_sequences * (max_len + 1) * 8)
    g = torch.Generator().manual_seed(seed)
    lengths = [max_len - math.floor(length_spread * (max_len - 2) * float(torch.rand((), generator=g)))
               for _ in range(num_sequences)]
    tokens = torch.zeros(num_sequences, max_len + 1, dtype=torch.long)
    tokens[:, 0] = torch.randint(VOCAB, (num_sequences,), generator=g)
    for t in range(1, max_len + 1):
        rule = (3 * tokens[:, t - 1] + 1) % VOCAB
        noise = torch.randint(VOCAB, (num_sequences,), generator=g)
        tokens[:, t] = torch.where(torch.rand(num_sequences, generator=g) < 0.25, noise, rule)
    inputs, labels = tokens[:, :-1].clone(), tokens[:, 1:].clone()
    for i, n in enumerate(lengths):
        inputs[i, n:] = 0  # the pad token; the model reads it, the loss ignores it
        labels[i, n:] = IGNORE_INDEX
    return TokenBatch(inputs, labels, tuple(lengths))


class TinyCausalLM(torch.nn.Module):
    """Embedding -> one GRU layer -> linear head: causal, so right-padding never changes a real token's loss."""

    def __init__(self, vocab_size: int = VOCAB, seed: int = 0):
        super().__init__()
        check_int("vocab_size", vocab_size, 2, 100_000)
        check_int("seed", seed, 0, 2**31 - 1)
        dim = 16
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            self.embed = torch.nn.Embedding(vocab_size, dim)
            self.rnn = torch.nn.GRU(dim, dim, batch_first=True)
            self.head = torch.nn.Linear(dim, vocab_size)
        self.to(DTYPE)
        self.vocab_size = vocab_size

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        """(n, T) token ids -> (n, T, vocab) logits."""
        hidden, _ = self.rnn(self.embed(inputs))
        return self.head(hidden)


def _check_batch(batch: object) -> TokenBatch:
    if not isinstance(batch, TokenBatch):
        raise TypeError(f"batch must be a TokenBatch (from make_token_batch), got {type(batch).__name__}")
    return batch


def split_window(batch: TokenBatch, accumulation_steps: int) -> list[slice]:
    """K equal slices of the window's sequences; K must divide the number of sequences."""
    n = _check_batch(batch).num_sequences
    check_int("accumulation_steps", accumulation_steps, 1, n)
    if n % accumulation_steps:
        raise ValueError(f"accumulation_steps must divide the {n} sequences of the batch, got {accumulation_steps}")
    b = n // accumulation_steps
    return [slice(i, i + b) for i in range(0, n, b)]


def token_weights(labels: torch.Tensor, class_weights: torch.Tensor | None = None) -> torch.Tensor:
    """What each token weighs in the loss, flat (n*T,): 0 for padding, 1 (or its class weight) otherwise."""
    real = (labels.reshape(-1) != IGNORE_INDEX).to(DTYPE)
    return real if class_weights is None else real * class_weights[labels.reshape(-1).clamp(min=0)]


def token_loss_sum(model: torch.nn.Module, inputs: torch.Tensor, labels: torch.Tensor,
                   class_weights: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """The summed (weighted) token loss of a batch and the summed weight of its real tokens."""
    if inputs.shape != labels.shape:
        raise ValueError(f"labels must have the shape of inputs {tuple(inputs.shape)}, got {tuple(labels.shape)}")
    logits = model(inputs)
    flat = torch.nn.functional.cross_entropy(
        logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), ignore_index=IGNORE_INDEX, reduction="none")
    weight = token_weights(labels, class_weights)
    return (flat * weight).sum(), weight.sum()


def accumulate_window(model: torch.nn.Module,
                      micro_batches: list[tuple[torch.Tensor, torch.Tensor]], normaliser: str,
                      class_weights: torch.Tensor | None = None) -> float:
    """Backward over a window's [(inputs, labels), ...] with `normaliser` "per_micro_batch" (the
    2024 bug) or "window"; the loss to log."""
    K = len(micro_batches)
    # This way divides before each backward, so it counts the window's denominator first (it can
    # also come last: scale .grad after the last backward).
    window_weight = sum(token_weights(labels, class_weights).sum() for _, labels in micro_batches)
    logged = 0.0
    for inputs, labels in micro_batches:
        total, count = token_loss_sum(model, inputs, labels, class_weights)
        if normaliser == "window":
            loss = total / window_weight  # every real token weighs 1 / (real tokens of the window)
        else:
            # a token mean per micro-batch, then 1/K: not the window mean
            loss = (total / count) / K
        loss.backward()  # backward adds into .grad: this is the accumulation
        logged += float(loss.detach())
    return logged


@dataclass(frozen=True)
class TokenGradient:
    """One window's loss (as the optimiser would log it) and its flat gradient (P,)."""

    loss: float
    grad: torch.Tensor


def big_batch_token_gradient(model: torch.nn.Module, batch: TokenBatch,
                             class_weights: torch.Tensor | None = None) -> TokenGradient:
    """The reference: the whole window in one pass, loss = sum of token losses / real tokens."""
    batch, weights, vocab = _check_batch(batch), class_weights, model.head.out_features
    if weights is not None:
        if not isinstance(weights, torch.Tensor) or weights.shape != (vocab,):
            shape = tuple(weights.shape) if isinstance(weights, torch.Tensor) else type(weights).__name__
            raise ValueError(f"class_weights must be a tensor of shape ({vocab},), one weight per token id, "
                             f"got {shape}")
        if bool((weights < 0).any()) or not bool(torch.isfinite(weights).all()):
            raise ValueError("class_weights must be finite and >= 0")
        weights = weights.to(DTYPE)
    model.zero_grad(set_to_none=True)
    total, count = token_loss_sum(model, batch.inputs, batch.labels, weights)
    loss = total / count
    loss.backward()
    grad = flat_grad(model)
    model.zero_grad(set_to_none=True)
    return TokenGradient(float(loss.detach()), grad)


def accumulated_token_gradient(model: torch.nn.Module, batch: TokenBatch, accumulation_steps: int,
                               normaliser: str) -> TokenGradient:
    """The gradient accumulated over K micro-batches with one of the two NORMALISERS (`accumulate_window`)."""
    micro_batches = [(batch.inputs[part], batch.labels[part]) for part in split_window(batch, accumulation_steps)]
    model.zero_grad(set_to_none=True)
    logged = accumulate_window(model, micro_batches, normaliser)
    grad = flat_grad(model)
    model.zero_grad(set_to_none=True)
    return TokenGradient(logged, grad)


@dataclass(frozen=True)
class NormaliserGap:
    """How far an accumulated window is from the big batch: the relative gradient gap, and allclose (loss too)."""

    grad_gap: float  # max |Δ grad| / max |big-batch grad|
    allclose: bool


def normaliser_gap(reference: TokenGradient, accumulated: TokenGradient) -> NormaliserGap:
    """Compare an accumulated window with the big batch (allclose at rtol 1e-7, atol 1e-10: float64)."""
    for name, value in (("reference", reference), ("accumulated", accumulated)):
        if not isinstance(value, TokenGradient):
            raise TypeError(f"{name} must be a TokenGradient, got {type(value).__name__}")
    gap = float((accumulated.grad - reference.grad).abs().max() / reference.grad.abs().max())
    ok = bool(torch.allclose(accumulated.grad, reference.grad, rtol=1e-7, atol=1e-10)) and math.isclose(
        accumulated.loss, reference.loss, rel_tol=1e-9)
    return NormaliserGap(gap, ok)


def gap_against_spread(spreads: Sequence[float], accumulation_steps: int = 4, seeds: Sequence[int] = (0, 1, 2),
                       progress: Callable[[Iterable], Iterable] | None = None) -> dict[str, list[float]]:
    """Mean relative gradient gap of each normaliser at each length spread, averaged over `seeds`: the plot's data."""
    if not spreads:
        raise ValueError("spreads must hold at least one length spread")
    if not seeds:
        raise ValueError("seeds must hold at least one seed")
    out: dict[str, list[float]] = {"spread": [], **{n: [] for n in NORMALISERS}}
    for spread in (progress or iter)(list(spreads)):
        sums = dict.fromkeys(NORMALISERS, 0.0)
        for seed in seeds:
            batch = make_token_batch(16, 24, spread, seed=seed)
            model = TinyCausalLM(seed=seed)
            reference = big_batch_token_gradient(model, batch)
            for name in NORMALISERS:
                sums[name] += normaliser_gap(
                    reference, accumulated_token_gradient(model, batch, accumulation_steps, name)).grad_gap
        out["spread"].append(float(spread))
        for name in NORMALISERS:
            out[name].append(sums[name] / len(seeds))
    return out
