"""In-batch negatives (InfoNCE, CLIP-style) and gradient caching.

A contrastive loss scores each pair against every other example of the batch: with n examples,
each sees n - 1 negatives (Radford et al., 2021, CLIP). Accumulating K micro-batches of b gives
each only b - 1, so the loss itself is a different function, not a rescaled one. Gradient caching
(Gao et al., 2021) gets the full-batch gradient back with micro-batch memory: embed everything
without a graph, take the full-batch loss's gradient with respect to the embeddings, then re-run
each micro-batch with a graph and backpropagate that slice of the cached gradient.
Float64, so that a failed allclose is the method, never rounding.
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator

import torch

from widgets.core.accumulation import flat_grad
from widgets.core.budget import check_memory
from widgets.core.config import check_float, check_int

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
    """Symmetric InfoNCE of paired embeddings (n, d): row i of za must pick row i of zb among all n, and back.

    The other n - 1 rows are the negatives: the loss depends on which examples share the batch.
    """
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
    """Refuse an InfoNCE over `scored` pairs at once whose (scored x scored) similarity matrix would
    not fit: the logits, two log-softmaxes and their gradients, about six float64 matrices."""
    check_memory(f"{what}: InfoNCE over {scored} pairs at once, {scored} x {scored} float64 scores",
                 6 * scored * scored * DTYPE.itemsize)


@dataclass(frozen=True)
class ContrastiveRun:
    """One way of computing the update's gradient: its loss, flat gradient, and what it cost.

    `forward_examples`: examples pushed through each tower (n for one pass, 2n for gradient cache);
    `peak_saved_bytes`: the largest total of tensors autograd held for one backward pass.
    """

    loss: float
    grad: torch.Tensor
    forward_examples: int
    peak_saved_bytes: int


class _Held:
    """A tensor autograd saved for backward, counted while its graph holds it: autograd drops this
    holder when backward frees the graph, and the count goes down with it."""

    def __init__(self, tensor: torch.Tensor, counter: "_SavedBytes") -> None:
        self.tensor, self.counter = tensor, counter
        self.nbytes = tensor.numel() * tensor.element_size()
        counter.add(self.nbytes)

    def __del__(self) -> None:
        self.counter.add(-self.nbytes)


class _SavedBytes:
    """The bytes of tensors autograd holds for backward right now, and their peak (saved_tensors_hooks)."""

    def __init__(self) -> None:
        self.current = 0
        self.peak = 0

    def add(self, nbytes: int) -> None:
        self.current += nbytes
        self.peak = max(self.peak, self.current)

    def hooks(self):
        return torch.autograd.graph.saved_tensors_hooks(lambda t: _Held(t, self), lambda held: held.tensor)


class _Watch:
    """What one way of computing the gradient cost: examples through tower a, bytes saved for backward."""

    def __init__(self) -> None:
        self.saved = _SavedBytes()
        self.forward_examples = 0

    def count(self, module, args, out) -> None:  # a forward hook on tower a
        self.forward_examples += args[0].shape[0]

    def run(self, loss: float, encoders: torch.nn.ModuleDict) -> ContrastiveRun:
        return ContrastiveRun(loss, flat_grad(encoders), self.forward_examples, self.saved.peak)


@contextmanager
def _watched(encoders: torch.nn.ModuleDict) -> Iterator[_Watch]:
    """Start from an empty .grad and count what the block costs; the hook goes and .grad is emptied
    again afterwards, also when the block raises."""
    watch = _Watch()
    handle = encoders["a"].register_forward_hook(watch.count)
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
    with _watched(encoders) as watch, watch.saved.hooks():
        loss = info_nce(encoders["a"](a), encoders["b"](b), temperature)
        loss.backward()
        return watch.run(float(loss.detach()), encoders)


def naive_accumulated_contrastive(encoders: torch.nn.ModuleDict, a: torch.Tensor, b: torch.Tensor,
                                  accumulation_steps: int, temperature: float = 0.1) -> ContrastiveRun:
    """Plain accumulation: each micro-batch's own InfoNCE (b - 1 negatives), divided by K."""
    slices = _check_inputs(encoders, a, b, accumulation_steps)
    _check_scores("naive_accumulated_contrastive", a.shape[0] // accumulation_steps)  # each micro-batch's own
    with _watched(encoders) as watch, watch.saved.hooks():
        logged = 0.0
        for part in slices:
            loss = info_nce(encoders["a"](a[part]), encoders["b"](b[part]), temperature) / accumulation_steps
            loss.backward()  # adds into .grad, but of a different loss: fewer negatives per example
            logged += float(loss.detach())
        return watch.run(logged, encoders)


def gradient_cache_contrastive(encoders: torch.nn.ModuleDict, a: torch.Tensor, b: torch.Tensor,
                               accumulation_steps: int, temperature: float = 0.1) -> ContrastiveRun:
    """Gradient caching (Gao et al., 2021): the full-batch loss with micro-batch activation memory.

    The algorithm is `gradient_cache`, the function notebook researcher_2 shows in a cell; this
    checks the inputs and measures what it costs."""
    slices = _check_inputs(encoders, a, b, accumulation_steps)
    _check_scores("gradient_cache_contrastive", a.shape[0])  # the cache is the full batch's scores
    with _watched(encoders) as watch, watch.saved.hooks():
        loss = gradient_cache(encoders, a, b, slices, temperature)
        return watch.run(float(loss.detach()), encoders)


def gradient_cache(encoders: torch.nn.ModuleDict, a: torch.Tensor, b: torch.Tensor, micro_batches: list[slice],
                   temperature: float = 0.1) -> torch.Tensor:
    """Leave in .grad the full-batch info_nce gradient, running the encoders on one micro-batch at a time."""
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
