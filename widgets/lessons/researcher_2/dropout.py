"""Dropout under accumulation: the same distribution of masks, not the same masks; a mask drawn from each
example's own generator makes accumulation exact again, with fresh masks every update."""
from __future__ import annotations

import torch

from widgets.core.accumulation import flat_grad
from widgets.core.config import check_float, check_int, check_time

DTYPE = torch.float64
MASK_SOURCES = ("global", "per_example")
MAX_STEP = 10**6  # steps and example ids below 1_000_003 give distinct (step, example) seeds
FEATURES, HIDDEN, MASK_SEED = 4, 32, 1234

# High estimate for the time check: a forward and backward pass of the small MLP takes well under
# 1 ms on one idle CPU thread (measured); take 2 ms, plus 2 us an example, for a busy shared one.
PASS_S, EXAMPLE_S = 2e-3, 2e-6


class DropoutMLP(torch.nn.Module):
    """(Linear -> ReLU -> dropout) x `dropout_layers` -> Linear(1); masks from `mask_source` (MASK_SOURCES)."""

    def __init__(self, p: float = 0.5, mask_source: str = "global", seed: int = 0, dropout_layers: int = 2):
        super().__init__()
        check_int("dropout_layers", dropout_layers, 1, 8)
        self.p = check_float("p", p, 0.0, 1.0, low_inclusive=True)
        if self.p == 1.0:
            raise ValueError("p must be below 1: p = 1 drops every unit")
        if mask_source not in MASK_SOURCES:
            raise ValueError(f"mask_source must be one of {MASK_SOURCES}, got {mask_source!r}")
        self.mask_source = mask_source
        check_int("seed", seed, 0, 2**31 - 1)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            sizes = [FEATURES] + [HIDDEN] * dropout_layers
            self.hidden = torch.nn.ModuleList(torch.nn.Linear(i, o) for i, o in zip(sizes, sizes[1:]))
            self.last = torch.nn.Linear(HIDDEN, 1)
        self.to(DTYPE)

    def example_masks(self, example_ids: torch.Tensor, width: int, step: int = 0) -> torch.Tensor:
        """Keep-masks (n, layers, width): each example's from its own generator, seeded by (MASK_SEED, step, id)."""
        check_int("step", step, 0, MAX_STEP)
        rows = []
        for i in example_ids.tolist():
            # one seed per (run seed, update, example), whatever micro-batch the example lands in
            g = torch.Generator().manual_seed(((MASK_SEED * 1_000_003 + step) * 1_000_003 + int(i)) % 2**63)
            rows.append((torch.rand(len(self.hidden), width, generator=g, dtype=DTYPE) >= self.p).to(DTYPE))
        return torch.stack(rows)

    def forward(self, x: torch.Tensor, example_ids: torch.Tensor | None = None, step: int = 0) -> torch.Tensor:
        """`example_ids` (n,) and the update `step` seed the masks when mask_source='per_example'."""
        per_example = self.training and self.p > 0 and self.mask_source == "per_example"
        if per_example:
            if example_ids is None or example_ids.shape != (x.shape[0],):
                raise ValueError(f"example_ids must hold one id per example, shape ({x.shape[0]},), "
                                 "when mask_source='per_example'")
            masks = self.example_masks(example_ids, self.last.in_features, step)
        h = x
        for depth, layer in enumerate(self.hidden):
            h = torch.relu(layer(h))
            if per_example:
                h = h * masks[:, depth] / (1 - self.p)  # the mask depends on the example, not on the pass
            elif self.training and self.p > 0:
                # torch.nn.Dropout's masks, drawn with torch.rand: bernoulli draws differ on MKL hosts
                h = h * (torch.rand(h.shape, dtype=DTYPE) >= self.p) / (1 - self.p)
        return self.last(h)


def make_dropout_data(num_examples: int = 32, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """x (n, 4), y (n, 1): a noisy linear target, float64."""
    check_int("num_examples", num_examples, 2, 100_000)
    g = torch.Generator().manual_seed(check_int("seed", seed, 0, 2**31 - 1))
    x = torch.randn(num_examples, FEATURES, generator=g, dtype=DTYPE)
    return x, x.sum(dim=1, keepdim=True) + 0.1 * torch.randn(num_examples, 1, generator=g, dtype=DTYPE)


def _update(model: DropoutMLP, x, y, accumulation_steps: int, rng_seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    n = x.shape[0]
    b = n // accumulation_steps
    ids = torch.arange(n)
    mse = torch.nn.functional.mse_loss
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(rng_seed)
        model.zero_grad(set_to_none=True)
        mse(model(x, ids), y).backward()
        big = flat_grad(model)
        torch.manual_seed(rng_seed)  # the same generator state for both runs, as a careful test would set
        model.zero_grad(set_to_none=True)
        for i in range(0, n, b):
            (mse(model(x[i:i + b], ids[i:i + b]), y[i:i + b]) / accumulation_steps).backward()
        accumulated = flat_grad(model)
    model.zero_grad(set_to_none=True)
    return big, accumulated


def _setup(mask_source: str, accumulation_steps: int, num_examples: int, seed: int, dropout_layers: int):
    n = check_int("num_examples", num_examples, 1, 100_000)
    check_int("accumulation_steps", accumulation_steps, 1, n)
    if n % accumulation_steps:
        raise ValueError(f"accumulation_steps must divide num_examples = {n}, got {accumulation_steps}")
    x, y = make_dropout_data(n, seed=seed)
    return DropoutMLP(mask_source=mask_source, seed=seed, dropout_layers=dropout_layers), x, y


def dropout_gradients(mask_source: str, accumulation_steps: int, num_examples: int = 32, seed: int = 0,
                      rng_seed: int = 0, dropout_layers: int = 2) -> tuple[torch.Tensor, torch.Tensor]:
    """(big-batch, accumulated) flat gradients of one update, the global generator reset to `rng_seed` before each."""
    model, x, y = _setup(mask_source, accumulation_steps, num_examples, seed, dropout_layers)
    return _update(model, x, y, accumulation_steps, check_int("rng_seed", rng_seed, 0, 2**31 - 1))


def mean_gap_over_draws(accumulation_steps: int, draws: int, num_examples: int = 32, seed: int = 0) -> float:
    """Relative gap between the means of `draws` big-batch and accumulated gradients: shrinks as draws grow."""
    check_int("draws", draws, 1, 100_000)
    model, x, y = _setup("global", accumulation_steps, num_examples, seed, 2)
    # each draw is one big-batch pass and K micro-batch passes over the same n examples
    check_time(f"mean_gap_over_draws(accumulation_steps={accumulation_steps}, draws={draws}, num_examples={num_examples})",
               draws * ((accumulation_steps + 1) * PASS_S + 2 * num_examples * EXAMPLE_S))
    big_sum = acc_sum = 0
    for r in range(draws):
        big, acc = _update(model, x, y, accumulation_steps, r)
        big_sum, acc_sum = big_sum + big, acc_sum + acc
    return float((big_sum - acc_sum).abs().max() / big_sum.abs().max())
