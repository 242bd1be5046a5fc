"""The mechanics of gradient accumulation, in torch only: split, boundary, scaling, gradients.

Everything returns tensors or small records; nothing here draws.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Sequence

import torch

from widgets.core.config import check_int

# Float32 sums taken in a different order differ in the last bits, so "equal" means allclose
# at these tolerances (a float32 mantissa holds about 7 decimal digits).
GRAD_RTOL = 1e-5
GRAD_ATOL = 1e-6

LossFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def make_regression_data(num_examples: int = 1024, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """A noisy non-linear regression task: x in [-2, 2], y = x + 0.6 sin(3x) + noise; shapes (n, 1).

    A straight line explains most of it within a few updates, so short runs show a clear fall
    in the loss; the wiggle and the noise (standard deviation 0.2) keep it from reaching zero.
    """
    check_int("num_examples", num_examples, 1, 100_000)
    check_int("seed", seed, 0, 2**31 - 1)
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(num_examples, 1, generator=g) * 4 - 2
    y = x + 0.6 * torch.sin(3 * x) + 0.2 * torch.randn(num_examples, 1, generator=g)
    return x, y


def make_model(seed: int = 0, hidden: int = 16) -> torch.nn.Module:
    """A small MLP (1 -> hidden -> 1, tanh) with weights fixed by `seed`: same seed, same start."""
    check_int("seed", seed, 0, 2**31 - 1)
    check_int("hidden", hidden, 1, 4096)
    g = torch.Generator().manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(1, hidden), torch.nn.Tanh(), torch.nn.Linear(hidden, 1))
    with torch.no_grad():
        for p in model.parameters():
            bound = 1 / math.sqrt(p.shape[-1]) if p.dim() > 1 else 0.5
            p.copy_((torch.rand(p.shape, generator=g) * 2 - 1) * bound)
    return model


def split_into_micro_batches(batch_size: int, micro_batch_size: int) -> list[slice]:
    """Slices that cut a batch of `batch_size` into micro-batches; the last one may be shorter."""
    check_int("batch_size", batch_size, 1)
    check_int("micro_batch_size", micro_batch_size, 1, batch_size)
    return [slice(i, min(i + micro_batch_size, batch_size)) for i in range(0, batch_size, micro_batch_size)]


def is_update_step(micro_step: int, accumulation_steps: int, total_micro_steps: int | None = None) -> bool:
    """Does this micro-step (counted from 0) end an update? Every K-th does, and so does the last one.

    Passing `total_micro_steps` makes an uneven final group end with an update too, instead of
    leaving its gradients in `.grad`, never applied.
    """
    check_int("accumulation_steps", accumulation_steps, 1)
    check_int("micro_step", micro_step, 0)
    if total_micro_steps is not None:
        check_int("total_micro_steps", total_micro_steps, micro_step + 1)
        if micro_step == total_micro_steps - 1:
            return True
    return (micro_step + 1) % accumulation_steps == 0


def micro_batch_weight(micro_batch_examples: int, update_examples: int) -> float:
    """The factor that scales one micro-batch's *mean* loss: its share n_k / n of the update.

    With K equal micro-batches this is 1/K; for an uneven group it stays exact, where 1/K would
    over- or under-weight the short micro-batch.
    """
    check_int("update_examples", update_examples, 1)
    check_int("micro_batch_examples", micro_batch_examples, 1, update_examples)
    return micro_batch_examples / update_examples


def micro_batch_weights(sizes: Sequence[int]) -> list[float]:
    """The weight of each micro-batch in one update, from their sizes; the weights sum to one."""
    if isinstance(sizes, (str, bytes)) or not hasattr(sizes, "__iter__"):
        raise TypeError(f"sizes must be a sequence of whole numbers, got {sizes!r}")
    sizes = list(sizes)
    if not sizes:
        raise ValueError("sizes must name at least one micro-batch")
    for i, n in enumerate(sizes):
        check_int(f"sizes[{i}]", n, 1)
    total = sum(sizes)
    return [micro_batch_weight(n, total) for n in sizes]


def _check_model(model: object) -> None:
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")


def _check_examples(x: object, y: object) -> None:
    """x and y: tensors with the same number of examples (first dimension)."""
    for name, value in (("x", x), ("y", y)):
        if not isinstance(value, torch.Tensor) or value.dim() == 0:
            raise TypeError(f"{name} must be a torch tensor of examples (first dimension), got {type(value).__name__}")
    if x.shape[0] != y.shape[0]:
        raise ValueError(f"x and y must hold the same number of examples, got {x.shape[0]} and {y.shape[0]}")


def flat_grad(model: torch.nn.Module) -> torch.Tensor:
    """All parameters' `.grad` as one flat vector (zeros where `.grad` is None); shape (P,)."""
    _check_model(model)
    parts = [
        (p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1) for p in model.parameters()
    ]
    return torch.cat(parts).detach().clone()


def big_batch_gradient(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor, loss_fn: LossFn) -> torch.Tensor:
    """The gradient of the mean loss over the whole batch in one pass; flat, shape (P,)."""
    _check_model(model)
    _check_examples(x, y)
    model.zero_grad(set_to_none=True)
    loss_fn(model(x), y).backward()
    grad = flat_grad(model)
    model.zero_grad(set_to_none=True)
    return grad


@dataclass(frozen=True)
class GradientPile:
    """How `.grad` builds up over one update: `pile[k]` is the flat `.grad` after micro-step k."""

    pile: torch.Tensor  # (number of micro-batches, P)
    micro_batch_sizes: tuple[int, ...]

    @property
    def accumulated(self) -> torch.Tensor:
        """The completed pile, what `optimizer.step()` would use; shape (P,)."""
        return self.pile[-1]


def accumulated_gradient(
    model: torch.nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    loss_fn: LossFn,
    micro_batch_size: int,
    *,
    divide_loss: bool = True,
) -> GradientPile:
    """Accumulate the gradient of `x, y` micro-batch by micro-batch, keeping every state of the pile.

    Each micro-batch's mean loss is scaled by its share of the batch (see `micro_batch_weight`),
    so the pile ends equal to `big_batch_gradient` up to float rounding, uneven last group included.
    `divide_loss=False` reproduces the classic bug: the pile ends (number of micro-batches)x too big.
    """
    _check_model(model)
    _check_examples(x, y)
    slices = split_into_micro_batches(x.shape[0], micro_batch_size)
    sizes = [s.stop - s.start for s in slices]
    model.zero_grad(set_to_none=True)
    snapshots = []
    for s, n in zip(slices, sizes):
        loss = loss_fn(model(x[s]), y[s])
        scale = micro_batch_weight(n, x.shape[0]) if divide_loss else 1.0
        (loss * scale).backward()  # backward adds into .grad: this is the accumulation
        snapshots.append(flat_grad(model))
    model.zero_grad(set_to_none=True)
    return GradientPile(torch.stack(snapshots), tuple(sizes))


def compare_gradients(a: torch.Tensor, b: torch.Tensor) -> tuple[float, bool]:
    """max |a - b| and whether `torch.allclose` holds at the package tolerances."""
    for name, value in (("a", a), ("b", b)):
        if not isinstance(value, torch.Tensor):
            raise TypeError(f"{name} must be a torch tensor, got {type(value).__name__}")
    if a.shape != b.shape:
        raise ValueError(f"gradients must have the same shape, got {tuple(a.shape)} and {tuple(b.shape)}")
    return float((a - b).abs().max()), bool(torch.allclose(a, b, rtol=GRAD_RTOL, atol=GRAD_ATOL))
