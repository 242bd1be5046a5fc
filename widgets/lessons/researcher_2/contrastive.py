"""In-batch negatives (InfoNCE, CLIP-style): K micro-batches of b give each pair b - 1 negatives, not n - 1; gradient
caching (Gao et al., 2021) gets the full-batch gradient back with micro-batch memory. Float64."""
from __future__ import annotations

import collections
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator

import torch

from widgets.core.accumulation import flat_grad
from widgets.core.config import check_float, check_int, check_memory
from widgets.research.saved_bytes import SavedTensorCounter  # researcher_4's meter: one meter for the lab

DTYPE = torch.float64


def make_pairs(num_pairs: int = 32, dim: int = 8, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Two noisy views of the same hidden vectors: a (n, dim) and b (n, dim), float64."""
    check_int("num_pairs", num_pairs, 2, 100_000)
    check_int("dim", dim, 1, 4096)
    check_int("seed", seed, 0, 2**31 - 1)
    # hidden, a, and b's three (n, dim) temporaries (hidden @ mix, the noise, the scaled noise), and mix
    check_memory(f"make_pairs(num_pairs={num_pairs}, dim={dim}), float64",
                 (5 * num_pairs * dim + dim * dim) * DTYPE.itemsize)
    g = torch.Generator().manual_seed(seed)
    hidden = torch.randn(num_pairs, dim, generator=g, dtype=DTYPE)
    mix = torch.randn(dim, dim, generator=g, dtype=DTYPE) / dim**0.5
    a = hidden + 0.3 * torch.randn(num_pairs, dim, generator=g, dtype=DTYPE)
    b = hidden @ mix + 0.3 * torch.randn(num_pairs, dim, generator=g, dtype=DTYPE)
    return a, b


def make_encoders(dim: int = 8, embed_dim: int = 8, hidden: int = 32, seed: int = 0) -> torch.nn.ModuleDict:
    """Two small towers, `encoders["a"]` and `encoders["b"]`: Linear -> tanh -> Linear, float64."""
    check_int("dim", dim, 1, 4096)
    check_int("embed_dim", embed_dim, 1, 4096)
    check_int("hidden", hidden, 1, 4096)
    check_int("seed", seed, 0, 2**31 - 1)
    params = 2 * ((dim + 1) * hidden + (hidden + 1) * embed_dim)  # two towers of two Linear layers
    # built in float32, then copied to float64: 4 + 8 bytes a parameter at the peak
    check_memory(f"make_encoders(dim={dim}, embed_dim={embed_dim}, hidden={hidden})", params * (4 + DTYPE.itemsize))
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        towers = {side: torch.nn.Sequential(torch.nn.Linear(dim, hidden), torch.nn.Tanh(), torch.nn.Linear(hidden, embed_dim))
                  for side in ("a", "b")}
    return torch.nn.ModuleDict(towers).to(DTYPE)


def info_nce(za: torch.Tensor, zb: torch.Tensor, temperature: float = 0.1) -> torch.Tensor:
    """Symmetric InfoNCE of paired embeddings (n, d): row i of za must pick row i of zb among all n, and back."""
    temperature = check_float("temperature", temperature, 0.0, 1e6)
    if za.dim() != 2 or za.shape != zb.shape:
        raise ValueError(f"za and zb must be paired embeddings of the same shape (n, d), got "
                         f"{tuple(za.shape)} and {tuple(zb.shape)}")
    if za.shape[0] < 2:
        raise ValueError("za and zb need at least 2 pairs: with 1 there is no negative")
    za, zb = torch.nn.functional.normalize(za, dim=1), torch.nn.functional.normalize(zb, dim=1)
    logits = za @ zb.T / temperature
    target = torch.arange(za.shape[0])
    return (torch.nn.functional.cross_entropy(logits, target) + torch.nn.functional.cross_entropy(logits.T, target)) / 2


def _check_inputs(encoders: object, a: torch.Tensor, b: torch.Tensor, accumulation_steps: int | None = None) -> list[slice]:
    if not isinstance(encoders, torch.nn.ModuleDict) or set(encoders) != {"a", "b"}:
        raise TypeError("encoders must be the ModuleDict from make_encoders (towers 'a' and 'b')")
    if a.shape != b.shape:
        raise ValueError(f"a and b must be paired (same shape), got {tuple(a.shape)} and {tuple(b.shape)}")
    n = a.shape[0]
    if accumulation_steps is None:
        return [slice(0, n)]
    check_int("accumulation_steps", accumulation_steps, 1, n)
    if n % accumulation_steps or n // accumulation_steps < 2:
        raise ValueError(f"accumulation_steps must divide the {n} pairs into micro-batches of at least 2, "
                         f"got {accumulation_steps}")
    size = n // accumulation_steps
    return [slice(i, i + size) for i in range(0, n, size)]


def _check_scores(what: str, scored: int) -> None:
    """Refuse an InfoNCE over `scored` pairs whose similarity matrices (about six, float64) would not fit."""
    check_memory(f"{what}: InfoNCE over {scored} pairs at once, {scored} x {scored} float64 scores",
                 6 * scored * scored * DTYPE.itemsize)


@dataclass(frozen=True)
class ContrastiveRun:
    """One way of computing the update's gradient: its loss, flat gradient, examples through each tower, and bytes
    saved per graph (both towers on the largest micro-batch, the InfoNCE on n embeddings) and for one backward."""

    loss: float
    grad: torch.Tensor
    forward_examples: int
    encoder_graph_bytes: int
    loss_graph_bytes: int
    peak_saved_bytes: int


def activation_bytes(counter: SavedTensorCounter) -> int:
    """Bytes a graph saved for backward, its weights left out: they are held whether or not it runs."""
    return counter.total - counter.parameter_bytes


def tower_graph_bytes(encoders: torch.nn.ModuleDict, a: torch.Tensor, b: torch.Tensor) -> int:
    """Bytes both towers' graph on (a, b) saves for backward, weights left out (researcher_4's meter)."""
    with SavedTensorCounter(encoders) as saved:
        encoders["a"](a), encoders["b"](b)
    return activation_bytes(saved)


def loss_graph_bytes(encoders: torch.nn.ModuleDict, a: torch.Tensor, b: torch.Tensor, temperature: float) -> int:
    """Bytes the InfoNCE graph on the embeddings of (a, b) saves for backward: what no micro-batching removes."""
    with torch.no_grad():
        za, zb = encoders["a"](a).requires_grad_(True), encoders["b"](b).requires_grad_(True)
    with SavedTensorCounter(torch.nn.Module()) as saved:  # no weights in the loss
        info_nce(za, zb, temperature)
    return saved.total


@contextmanager
def _watched(encoders: torch.nn.ModuleDict) -> Iterator[collections.Counter]:
    """Count the examples through tower a (`["forward_examples"]`), from an empty .grad, emptied again afterwards."""
    watch = collections.Counter()

    def count(module, args, out) -> None:
        watch["forward_examples"] += args[0].shape[0]

    handle = encoders["a"].register_forward_hook(count)
    encoders.zero_grad(set_to_none=True)
    try:
        yield watch
    finally:
        handle.remove()
        encoders.zero_grad(set_to_none=True)


def full_batch_contrastive(encoders: torch.nn.ModuleDict, a: torch.Tensor, b: torch.Tensor,
                           temperature: float = 0.1) -> ContrastiveRun:
    """The reference: all n pairs in one pass, each with n - 1 negatives."""
    _check_inputs(encoders, a, b)
    _check_scores("full_batch_contrastive", a.shape[0])
    with _watched(encoders) as watch:
        with SavedTensorCounter(encoders) as saved:  # one graph: both towers and the loss
            loss = info_nce(encoders["a"](a), encoders["b"](b), temperature)
        loss.backward()
        grad, examples = flat_grad(encoders), watch["forward_examples"]
    towers, scores = tower_graph_bytes(encoders, a, b), loss_graph_bytes(encoders, a, b, temperature)  # its two parts
    return ContrastiveRun(float(loss.detach()), grad, examples, towers, scores, activation_bytes(saved))


def naive_accumulated_contrastive(encoders: torch.nn.ModuleDict, a: torch.Tensor, b: torch.Tensor,
                                  accumulation_steps: int, temperature: float = 0.1) -> ContrastiveRun:
    """Plain accumulation: each micro-batch's own InfoNCE (b - 1 negatives), divided by K."""
    slices = _check_inputs(encoders, a, b, accumulation_steps)
    _check_scores("naive_accumulated_contrastive", a.shape[0] // accumulation_steps)  # each micro-batch's own
    with _watched(encoders) as watch:
        logged, peak = 0.0, 0
        for part in slices:
            with SavedTensorCounter(encoders) as saved:
                loss = info_nce(encoders["a"](a[part]), encoders["b"](b[part]), temperature) / accumulation_steps
            peak = max(peak, activation_bytes(saved))
            loss.backward()  # adds into .grad, but of a different loss: fewer negatives per example
            logged += float(loss.detach())
        grad, examples = flat_grad(encoders), watch["forward_examples"]
    first = slices[0]
    towers = tower_graph_bytes(encoders, a[first], b[first])
    scores = loss_graph_bytes(encoders, a[first], b[first], temperature)
    return ContrastiveRun(logged, grad, examples, towers, scores, peak)


def gradient_cache_contrastive(encoders: torch.nn.ModuleDict, a: torch.Tensor, b: torch.Tensor,
                               accumulation_steps: int, temperature: float = 0.1) -> ContrastiveRun:
    """Gradient caching (`gradient_cache`, shown in a cell), checked, run and measured graph by graph."""
    slices = _check_inputs(encoders, a, b, accumulation_steps)
    _check_scores("gradient_cache_contrastive", a.shape[0])  # the cache is the full batch's scores
    with _watched(encoders) as watch:
        loss = gradient_cache(encoders, a, b, slices, temperature)
        grad, examples = flat_grad(encoders), watch["forward_examples"]
    scores = loss_graph_bytes(encoders, a, b, temperature)  # on the cache, as step 1 builds it
    towers = max(tower_graph_bytes(encoders, a[part], b[part]) for part in slices)
    return ContrastiveRun(float(loss), grad, examples, towers, scores, max(towers, scores))


def gradient_cache(encoders: torch.nn.ModuleDict, a: torch.Tensor, b: torch.Tensor,
                   micro_batches: list[slice],
                   temperature: float = 0.1) -> torch.Tensor:
    """Leave in .grad the full-batch info_nce gradient, running the encoders on one micro-batch at
    a time."""
    # 1. Embed every micro-batch without a graph: no activations kept.
    with torch.no_grad():
        za = torch.cat([encoders["a"](a[part]) for part in micro_batches])
        zb = torch.cat([encoders["b"](b[part]) for part in micro_batches])
    # 2. The full-batch loss on the cached embeddings; its gradient w.r.t. them is the cache.
    za.requires_grad_(True)
    zb.requires_grad_(True)
    loss = info_nce(za, zb, temperature)
    loss.backward()
    # 3. Re-run each micro-batch with a graph; backpropagate its slice of the cached gradient.
    for part in micro_batches:
        out_a, out_b = encoders["a"](a[part]), encoders["b"](b[part])
        torch.autograd.backward([out_a, out_b], [za.grad[part], zb.grad[part]])  # adds into .grad
    return loss.detach()
