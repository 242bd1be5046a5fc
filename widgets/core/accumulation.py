"""The mechanics of gradient accumulation, in torch only: boundary, scaling, gradients, the rounding floor;
tensors and small records out, nothing drawn."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, NamedTuple, Sequence

import torch

from widgets.core.config import PY_OBJECT, check_int, check_memory

# The lab's one tolerance for "equal up to rounding" (every allclose verdict of the package): float32
# sums in another order differ by a few ulps (GRAD_RTOL is ~84 ulps of 1.0), while every accumulation
# bug moves the gradient by a large fraction of itself; GRAD_ATOL only matters for entries near zero.
GRAD_RTOL = 1e-5
GRAD_ATOL = 1e-6


def below(value: float, ceiling: float) -> str:
    """'below 1e-14' when |value| < ceiling (0 included), else the value itself, flagged; `ceiling`: the claim's bound.

    A number at the rounding floor is printed as the bound its claim needs, so that every CPU prints the same
    text: torch picks its kernels per instruction set, and sums taken in another order round differently
    (a float64 gap of 5.6e-16 on one CPU is 7.1e-16 on another), which nbval on the other CPU would catch."""
    if not math.isfinite(ceiling) or ceiling <= 0:
        raise ValueError(f"ceiling must be a finite number > 0, got {ceiling!r}")
    if math.isfinite(value) and abs(value) < ceiling:
        return f"below {ceiling:.0e}"
    return f"{value:.3g} (NOT below {ceiling:.0e})"

LossFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def _check_model(model: object) -> None:
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")


def _check_examples(x: object, y: object) -> None:
    """`x` and `y` must be tensors holding the same number of examples (dim 0)."""
    for label, tensor in (("x", x), ("y", y)):
        if not isinstance(tensor, torch.Tensor) or tensor.dim() == 0:
            raise TypeError(f"{label} must be a torch tensor of examples (first dimension), got {type(tensor).__name__}")
    if x.shape[0] != y.shape[0]:
        raise ValueError(f"x and y must hold the same number of examples, got {x.shape[0]} and {y.shape[0]}")


def make_regression_data(num_examples: int = 1024, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """A noisy regression task: x in [-2, 2], y = x + 0.6 sin(3x) + N(0, 0.2^2); shapes (n, 1)."""
    check_int("num_examples", num_examples, 1, 100_000)
    check_int("seed", seed, 0, 2**31 - 1)
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(num_examples, 1, generator=g) * 4 - 2
    y = x + 0.6 * torch.sin(3 * x) + 0.2 * torch.randn(num_examples, 1, generator=g)
    return x, y


def make_model(seed: int = 0) -> torch.nn.Module:
    """A small MLP (1 -> 16 -> 1, tanh) with weights fixed by `seed`: same seed, same start."""
    check_int("seed", seed, 0, 2**31 - 1)
    g = torch.Generator().manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(1, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
    with torch.no_grad():
        for p in model.parameters():
            bound = 1 / math.sqrt(p.shape[-1]) if p.dim() > 1 else 0.5
            p.copy_((torch.rand(p.shape, generator=g) * 2 - 1) * bound)
    return model


def is_update_step(micro_step: int, accumulation_steps: int, total_micro_steps: int | None = None) -> bool:
    """Does this micro-step (from 0) end an update? Every K-th does, and the last of `total_micro_steps`."""
    check_int("accumulation_steps", accumulation_steps, 1)
    check_int("micro_step", micro_step, 0)
    if total_micro_steps is not None:
        check_int("total_micro_steps", total_micro_steps, micro_step + 1)
    last = total_micro_steps is not None and micro_step == total_micro_steps - 1
    return (micro_step + 1) % accumulation_steps == 0 or last


def windows(total_micro_steps: int, accumulation_steps: int) -> list[range]:
    """The micro-steps of each update window: `windows(10, 4)` is [range(0, 4), range(4, 8), range(8, 10)]."""
    K, n = accumulation_steps, total_micro_steps
    check_memory(f"windows({n}, {K})", -(-n // K) * PY_OBJECT)  # one range per window
    return [range(start, min(start + K, n)) for start in range(0, n, K)]


def micro_batch_weight(micro_batch_examples: int, update_examples: int) -> float:
    """The factor on one micro-batch's *mean* loss: its share n_k / n of the update (1/K for K equal ones)."""
    check_int("update_examples", update_examples, 1)
    check_int("micro_batch_examples", micro_batch_examples, 1, update_examples)
    return micro_batch_examples / update_examples


def micro_batch_weights(sizes: Sequence[int]) -> list[float]:
    """The weight of each micro-batch in one update, from their sizes; the weights sum to one."""
    total = sum(sizes)
    return [n / total for n in sizes]


# The label PyTorch's cross_entropy leaves out (padding, prompt tokens): its `ignore_index` default.
IGNORE_INDEX = -100


def real_tokens(labels: torch.Tensor) -> int:
    """Tokens that count in a token-mean loss: labels that are not IGNORE_INDEX."""
    return int((labels != IGNORE_INDEX).sum())


def flat_grad(model: torch.nn.Module) -> torch.Tensor:
    """All parameters' `.grad` as one flat vector (zeros where `.grad` is None); shape (P,)."""
    _check_model(model)
    parts = [
        (p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1) for p in model.parameters()
    ]
    return torch.cat(parts).detach().clone()


def flat_weights(model: torch.nn.Module) -> torch.Tensor:
    """All parameters as one flat vector, detached (to compare trained models); shape (P,)."""
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


def flat_parameter_indices(model: torch.nn.Module, entries: Sequence[tuple[str, int]]) -> dict[str, int]:
    """{label: flat index} of (parameter name, element) `entries` in `flat_grad`'s vector, e.g. "0.weight[0]"."""
    offsets, sizes, start = {}, {}, 0
    for name, p in model.named_parameters():
        offsets[name], sizes[name] = start, p.numel()
        start += p.numel()
    indices = {}
    for name, element in entries:
        label = name if sizes[name] == 1 else f"{name}[{element}]"
        indices[label] = offsets[name] + element
    return indices


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
    """Accumulate the gradient of `x, y` micro-batch by micro-batch (each mean loss weighted by its share),
    keeping every state of the pile; `divide_loss=False` is the classic bug."""
    _check_model(model)
    _check_examples(x, y)
    check_int("micro_batch_size", micro_batch_size, 1, x.shape[0])
    model.zero_grad(set_to_none=True)
    snapshots, sizes = [], []
    for inputs, targets in zip(x.split(micro_batch_size), y.split(micro_batch_size)):
        loss = loss_fn(model(inputs), targets)
        sizes.append(len(targets))
        scale = micro_batch_weight(len(targets), x.shape[0]) if divide_loss else 1.0
        (loss * scale).backward()  # backward adds into .grad: this is the accumulation
        snapshots.append(flat_grad(model))
    model.zero_grad(set_to_none=True)
    return GradientPile(torch.stack(snapshots), tuple(sizes))


class GradientComparison(NamedTuple):
    """Two gradients compared: the largest |difference| and the lab's allclose verdict."""

    max_abs_diff: float
    allclose: bool


def compare_gradients(a: torch.Tensor, b: torch.Tensor) -> GradientComparison:
    """max |a - b| and the lab's allclose verdict; a gradient holding an inf or a nan is never allclose."""
    for name, value in (("a", a), ("b", b)):
        if not isinstance(value, torch.Tensor):
            raise TypeError(f"{name} must be a torch tensor, got {type(value).__name__}")
    if a.shape != b.shape:
        raise ValueError(f"gradients must have the same shape, got {tuple(a.shape)} and {tuple(b.shape)}")
    finite = bool(torch.isfinite(a).all() and torch.isfinite(b).all())
    diff = float((a - b).abs().max()) if a.numel() else 0.0
    return GradientComparison(diff, finite and bool(torch.allclose(a, b, rtol=GRAD_RTOL, atol=GRAD_ATOL)))
