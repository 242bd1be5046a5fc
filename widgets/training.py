"""Three ways to train the same model on the same data, recorded update by update.

- accumulated: K micro-batches of b examples, one optimizer step per K micro-steps;
- big_batch:   the same K*b examples in one pass, one step (what accumulation imitates);
- small_batch: only the first micro-batch of each group, one step each (no accumulation).

`run_regimes` returns a `RunRecord` (numbers and tensors, never a figure): the plots, the
explorer and the tests all read it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from widgets.accumulation import (
    GradientPile,
    compare_gradients,
    flat_grad,
    is_update_step,
    make_model,
    make_regression_data,
    micro_batch_weight,
)
from widgets.config import AccumulationConfig

REGIMES = ("accumulated", "big_batch", "small_batch")
PILE_PARAMETERS = {"0.weight[0]": 0, "2.weight[0]": 32, "2.bias": 48}  # flat indices shown in pile plots


def mse(prediction: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Mean squared error, reduced by the mean over examples: the scaling below assumes a mean."""
    return torch.nn.functional.mse_loss(prediction, target)


@dataclass(frozen=True)
class RunRecord:
    """What one `run_regimes` call measured; lists hold one entry per update.

    `train_loss` is the mean loss over the examples behind the update (what a log should show,
    never the loss divided by K); `eval_loss` is the loss on the whole data set after the update.
    `grad_diff[u]` is max |accumulated - big-batch gradient| at the same weights, the weights the
    accumulated run had when update u began.
    """

    config: AccumulationConfig
    train_loss: dict[str, list[float]]
    eval_loss: dict[str, list[float]]
    grad_norm: dict[str, list[float]]
    grad_diff: list[float]
    grads_match: list[bool]
    passes_per_update: dict[str, int]
    optimizer_steps: dict[str, int]
    update_flags: list[bool]  # one per micro-step of the accumulated run: did it end an update?
    first_pile: GradientPile  # .grad after each micro-step of the first update
    first_target: torch.Tensor  # the big-batch gradient the first pile should reach; (P,)
    initial_eval_loss: float
    diverged_at: dict[str, int | None]  # the update whose loss or gradient stopped being finite

    @property
    def max_grad_diff(self) -> float:
        """The largest |accumulated - big-batch| over the whole run (nan if the run diverged)."""
        return max(self.grad_diff) if self.grad_diff else math.nan

    @property
    def allclose(self) -> bool:
        """Did every update's accumulated gradient allclose the big-batch gradient?"""
        return all(self.grads_match) and self.diverged_at["accumulated"] is None


def _is_finite(*values: float) -> bool:
    return all(math.isfinite(v) for v in values)


def _group_sizes(config: AccumulationConfig) -> list[int]:
    """Micro-batches per update: K for each full group, then the tail group if there is one."""
    sizes = [config.accumulation_steps] * config.num_updates
    return sizes + ([config.tail_micro_batches] if config.tail_micro_batches else [])


def _run_accumulated(config, x, y, order, record):
    """The accumulation loop, bugs included; fills `record` (a dict) and returns it."""
    K, b, bugs = config.accumulation_steps, config.micro_batch_size, config.bugs
    model = make_model(config.seed)
    optimizer = torch.optim.SGD(model.parameters(), lr=config.learning_rate)
    total = config.total_micro_steps
    micro_step, start, steps = 0, 0, 0
    flags, losses, evals, norms, diffs, matches = [], [], [], [], [], []
    pile_snapshots, target, diverged = [], None, None
    for update, n_micro in enumerate(_group_sizes(config)):
        group = order[start : start + n_micro * b]
        start += n_micro * b
        reference = _reference_gradient(model, x[group], y[group])
        logged = 0.0
        for k in range(n_micro):
            if "zero_grad_every_micro_step" in bugs:
                optimizer.zero_grad(set_to_none=True)  # BUG: wipes the pile before it is complete
            idx = group[k * b : (k + 1) * b]
            loss = mse(model(x[idx]), y[idx])
            # Scale the mean loss by this micro-batch's share of the update (1/K for equal
            # micro-batches), so the piled-up .grad is the gradient of the update's mean loss.
            scale = 1.0 if "loss_not_divided" in bugs else micro_batch_weight(b, n_micro * b)
            (loss * scale).backward()
            logged += loss.item() / n_micro  # log the undivided mean, never loss * scale
            if update == 0:
                pile_snapshots.append(flat_grad(model))
            boundary = is_update_step(micro_step, K, total)
            flags.append(boundary)
            if boundary:
                grad = flat_grad(model)
                diff, match = compare_gradients(grad, reference)
                diffs.append(diff)
                matches.append(match)
                norms.append(float(grad.norm()))
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
                steps += 1
            elif "step_every_micro_step" in bugs:
                optimizer.step()  # BUG: updates on a half-built pile, K times per update
                steps += 1
            micro_step += 1
        if update == 0:
            target = reference
        losses.append(logged)
        evals.append(_eval_loss(model, x, y))
        if not _is_finite(logged, evals[-1], norms[-1]):
            diverged = update
            break
    record.update(
        update_flags=flags,
        first_pile=GradientPile(torch.stack(pile_snapshots), tuple([b] * len(pile_snapshots))),
        first_target=target,
        grad_diff=diffs,
        grads_match=matches,
    )
    return losses, evals, norms, steps, diverged


def _reference_gradient(model, x, y):
    """The big-batch gradient at the model's current weights, leaving its `.grad` untouched."""
    saved = [p.grad for p in model.parameters()]
    model.zero_grad(set_to_none=True)
    mse(model(x), y).backward()
    grad = flat_grad(model)
    for p, g in zip(model.parameters(), saved):
        p.grad = g
    return grad


@torch.no_grad()
def _eval_loss(model, x, y) -> float:
    return mse(model(x), y).item()


def _run_plain(config, x, y, order, *, big: bool):
    """One pass and one step per update: over the whole group (big) or its first micro-batch."""
    b = config.micro_batch_size
    model = make_model(config.seed)
    optimizer = torch.optim.SGD(model.parameters(), lr=config.learning_rate)
    losses, evals, norms, start, diverged = [], [], [], 0, None
    for update, n_micro in enumerate(_group_sizes(config)):
        group = order[start : start + n_micro * b]
        start += n_micro * b
        idx = group if big else group[:b]
        loss = mse(model(x[idx]), y[idx])
        loss.backward()
        norms.append(float(flat_grad(model).norm()))
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(loss.item())
        evals.append(_eval_loss(model, x, y))
        if not _is_finite(losses[-1], evals[-1], norms[-1]):
            diverged = update
            break
    return losses, evals, norms, len(losses), diverged


def example_order(config: AccumulationConfig) -> torch.Tensor:
    """The order examples are drawn in: a seeded permutation, repeated as often as the run needs."""
    g = torch.Generator().manual_seed(config.seed + 1)
    needed = config.total_micro_steps * config.micro_batch_size
    reps = -(-needed // config.num_examples)
    return torch.cat([torch.randperm(config.num_examples, generator=g) for _ in range(reps)])[:needed]


def run_regimes(config: AccumulationConfig) -> RunRecord:
    """Train the three regimes from the same initial weights on the same examples; see module doc."""
    if not isinstance(config, AccumulationConfig):
        raise TypeError(f"config must be an AccumulationConfig, got {type(config).__name__}")
    x, y = make_regression_data(config.num_examples, config.seed)
    order = example_order(config)
    extra: dict = {}
    results = {
        "accumulated": _run_accumulated(config, x, y, order, extra),
        "big_batch": _run_plain(config, x, y, order, big=True),
        "small_batch": _run_plain(config, x, y, order, big=False),
    }
    return RunRecord(
        config=config,
        train_loss={r: v[0] for r, v in results.items()},
        eval_loss={r: v[1] for r, v in results.items()},
        grad_norm={r: v[2] for r, v in results.items()},
        passes_per_update={"accumulated": config.accumulation_steps, "big_batch": 1, "small_batch": 1},
        optimizer_steps={r: v[3] for r, v in results.items()},
        initial_eval_loss=_eval_loss(make_model(config.seed), x, y),
        diverged_at={r: v[4] for r, v in results.items()},
        **extra,
    )
