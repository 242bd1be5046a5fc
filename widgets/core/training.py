"""Three ways to train the same model on the same data, recorded update by update.

- accumulated: K micro-batches of b examples, one optimizer step per K micro-steps;
- big_batch:   the same K*b examples in one pass, one step (what accumulation imitates);
- small_batch: only the first micro-batch of each group, one step each (no accumulation).

All three clip the gradient once per update (`max_grad_norm`) and step the learning-rate warmup
once per update (`warmup_updates`), when the config asks for them. `run_regimes` returns a
`RunRecord` (numbers and tensors, never a figure): the plots, the explorer and the tests read it.
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Callable

import torch

from widgets.core.accumulation import (
    GradientPile,
    big_batch_gradient,
    compare_gradients,
    flat_grad,
    is_update_step,
    make_model,
    make_regression_data,
    micro_batch_weight,
)
from widgets.core.config import AccumulationConfig, check_float, check_int

REGIMES = ("accumulated", "big_batch", "small_batch")
PILE_PARAMETERS = {"0.weight[0]": 0, "2.weight[0]": 32, "2.bias": 48}  # flat indices shown in pile plots


def mse(prediction: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Mean squared error, reduced by the mean over examples: the scaling below assumes a mean."""
    return torch.nn.functional.mse_loss(prediction, target)


def linear_warmup(warmup_updates: int) -> Callable[[int], float]:
    """The learning-rate factor after n scheduler steps, for `torch.optim.lr_scheduler.LambdaLR`.

    Stepped once per update, update u (from 0) runs at (u+1)/(W+1) of the rate while u < W,
    then at the full rate: W updates ramp up. Stepped every micro-step, the ramp ends K x sooner.
    """
    check_int("warmup_updates", warmup_updates, 0)
    return lambda n: min(1.0, (n + 1) / (warmup_updates + 1))


def clip_flat(grad: torch.Tensor, max_norm: float | None) -> torch.Tensor:
    """A flat gradient clipped as `torch.nn.utils.clip_grad_norm_` would clip it (None: unchanged)."""
    if max_norm is None:
        return grad
    max_norm = check_float("max_norm", max_norm, 0.0, math.inf)
    return grad * min(1.0, max_norm / (float(grad.norm()) + 1e-6))  # the same 1e-6 torch adds


@dataclass(frozen=True)
class RunRecord:
    """What one `run_regimes` call measured; lists hold one entry per update.

    `train_loss` is the loss each run logged for the update: the mean loss over the examples
    behind it, except with the `log_divided_loss` bug, where the accumulated run logs the divided
    loss (K x too small; n x for a tail of n micro-batches). `true_train_loss` is the accumulated
    run's real mean, whatever it logged. `eval_loss` is the loss on all examples after the update.
    `grad_diff[u]` is max |accumulated - big-batch gradient| at the same weights (those the
    accumulated run had when update u began), both taken as `optimizer.step()` uses them: after
    clipping, if any. An update whose step never happened (`forget_final_step`) applied nothing,
    so it is compared as a zero gradient. `grad_scale[u]` is |applied| / |big-batch| gradient
    (K with `loss_not_divided`, 0 for a forgotten step). `grad_norm[r][u]` is the norm of the
    completed gradient before clipping; `learning_rates[r][u]` the rate update u used.
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
    learning_rates: dict[str, list[float]]
    true_train_loss: list[float]
    grad_scale: list[float]

    @property
    def max_grad_diff(self) -> float:
        """The largest |accumulated - big-batch| over the whole run (nan if the run diverged)."""
        return max(self.grad_diff) if self.grad_diff else math.nan

    @property
    def allclose(self) -> bool:
        """Did every update of the accumulated run equal the big-batch update: the gradient allclose
        and the same learning rate? The log is not part of it: see `log_matches`."""
        return (
            all(self.grads_match)
            and self.diverged_at["accumulated"] is None
            and self.learning_rates["accumulated"] == self.learning_rates["big_batch"]
        )

    @property
    def log_matches(self) -> bool:
        """Did the accumulated run log its true mean loss at every update?"""
        logged, true = self.train_loss["accumulated"], self.true_train_loss
        return len(logged) == len(true) and all(math.isclose(a, b, rel_tol=1e-6) for a, b in zip(logged, true))


def _is_finite(*values: float) -> bool:
    return all(math.isfinite(v) for v in values)


def _group_sizes(config: AccumulationConfig) -> list[int]:
    """Micro-batches per update: K for each full group, then the tail group if there is one."""
    sizes = [config.accumulation_steps] * config.num_updates
    return sizes + ([config.tail_micro_batches] if config.tail_micro_batches else [])


def _optimizer(model, config):
    """SGD with the config's warmup; the scheduler is None when there is no warmup."""
    optimizer = torch.optim.SGD(model.parameters(), lr=config.learning_rate)
    if not config.warmup_updates:
        return optimizer, None
    return optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, linear_warmup(config.warmup_updates))


def _clip(model, max_norm) -> tuple[float, torch.Tensor]:
    """Clip `.grad` in place when `max_norm` is set; return the norm before clipping and the
    flat gradient `optimizer.step()` will use."""
    if max_norm is None:
        grad = flat_grad(model)
        return float(grad.norm()), grad
    norm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm))
    return norm, flat_grad(model)


def _run_accumulated(config, x, y, order, record):
    """The accumulation loop, bugs included; fills `record` (a dict) and returns the curves."""
    K, b, bugs, max_norm = config.accumulation_steps, config.micro_batch_size, config.bugs, config.max_grad_norm
    model = make_model(config.seed)
    optimizer, scheduler = _optimizer(model, config)
    # forget_final_step: the boundary test without the run's length misses the uneven last group
    total = None if "forget_final_step" in bugs else config.total_micro_steps
    micro_step, start, steps = 0, 0, 0
    flags, losses, true_losses, evals, norms, lrs, diffs, matches, scales = ([] for _ in range(9))
    pile_snapshots, target, diverged = [], None, None
    for update, n_micro in enumerate(_group_sizes(config)):
        group = order[start : start + n_micro * b]
        start += n_micro * b
        reference = _reference_gradient(model, x[group], y[group])
        applied_target = clip_flat(reference, max_norm)  # what a correct step would apply
        logged = true_mean = 0.0
        stepped = False
        for k in range(n_micro):
            if "zero_grad_every_micro_step" in bugs:
                optimizer.zero_grad(set_to_none=True)  # BUG: wipes the pile before it is complete
            idx = group[k * b : (k + 1) * b]
            loss = mse(model(x[idx]), y[idx])
            # Scale the mean loss by this micro-batch's share of the update (1/K for equal
            # micro-batches), so the piled-up .grad is the gradient of the update's mean loss.
            scale = micro_batch_weight(b, n_micro * b)
            if "tail_divided_by_k" in bugs:
                scale = 1 / K  # BUG: right for a full group, too small for a shorter final one
            if "loss_not_divided" in bugs:
                scale = 1.0  # BUG: K micro-batch means add up to K times the update's mean
            elif "loss_divided_twice" in bugs:
                scale = scale * scale  # BUG: the share applied twice, 1/K**2
            (loss * scale).backward()
            value = loss.item()
            true_mean += value / n_micro  # log the undivided mean over the update's examples
            logged += (value * scale if "log_divided_loss" in bugs else value) / n_micro  # BUG if divided
            if "clip_every_micro_step" in bugs:
                torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)  # BUG: clips a half-built pile
            if update == 0:
                pile_snapshots.append(flat_grad(model))
            boundary = is_update_step(micro_step, K, total)
            flags.append(boundary)
            if boundary:
                # clip once, on the completed pile (the bug above has already clipped it)
                norm, grad = _clip(model, None if "clip_every_micro_step" in bugs else max_norm)
                norms.append(norm)
                _compare(grad, applied_target, diffs, matches, scales)
                lrs.append(optimizer.param_groups[0]["lr"])
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
                if scheduler is not None and "scheduler_every_micro_step" not in bugs:
                    scheduler.step()
                steps += 1
                stepped = True
            elif "step_every_micro_step" in bugs:
                optimizer.step()  # BUG: updates on a half-built pile, K times per update
                steps += 1
            if scheduler is not None and "scheduler_every_micro_step" in bugs:
                with warnings.catch_warnings():  # torch rightly warns that this steps before the
                    warnings.simplefilter("ignore", UserWarning)  # first update: that is the bug
                    scheduler.step()  # BUG: the warmup advances K times per update
            micro_step += 1
        if not stepped:  # the forgotten final step: the pile stays in .grad, never applied
            norms.append(float(flat_grad(model).norm()))
            _compare(torch.zeros_like(applied_target), applied_target, diffs, matches, scales)
            lrs.append(optimizer.param_groups[0]["lr"])
        if update == 0:
            target = reference
        losses.append(logged)
        true_losses.append(true_mean)
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
        grad_scale=scales,
        true_train_loss=true_losses,
    )
    return losses, evals, norms, steps, diverged, lrs


def _compare(grad, target, diffs, matches, scales):
    """Append max |grad - target|, their allclose verdict and |grad| / |target|."""
    diff, match = compare_gradients(grad, target)
    diffs.append(diff)
    matches.append(match)
    target_norm = float(target.norm())
    scales.append(float(grad.norm()) / target_norm if target_norm > 0 else math.nan)


def _reference_gradient(model, x, y):
    """The big-batch gradient at the model's current weights, leaving its `.grad` untouched."""
    saved = [p.grad for p in model.parameters()]
    grad = big_batch_gradient(model, x, y, mse)
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
    optimizer, scheduler = _optimizer(model, config)
    losses, evals, norms, lrs, start, diverged = [], [], [], [], 0, None
    for update, n_micro in enumerate(_group_sizes(config)):
        group = order[start : start + n_micro * b]
        start += n_micro * b
        idx = group if big else group[:b]
        loss = mse(model(x[idx]), y[idx])
        loss.backward()
        norms.append(_clip(model, config.max_grad_norm)[0])
        lrs.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if scheduler is not None:
            scheduler.step()
        losses.append(loss.item())
        evals.append(_eval_loss(model, x, y))
        if not _is_finite(losses[-1], evals[-1], norms[-1]):
            diverged = update
            break
    return losses, evals, norms, len(losses), diverged, lrs


def _check_config(config: object) -> None:
    if not isinstance(config, AccumulationConfig):
        raise TypeError(f"config must be an AccumulationConfig, got {type(config).__name__}")


def example_order(config: AccumulationConfig) -> torch.Tensor:
    """The order examples are drawn in: a seeded permutation, repeated as often as the run needs."""
    _check_config(config)
    g = torch.Generator().manual_seed(config.seed + 1)
    needed = config.total_micro_steps * config.micro_batch_size
    reps = -(-needed // config.num_examples)
    return torch.cat([torch.randperm(config.num_examples, generator=g) for _ in range(reps)])[:needed]


def run_regimes(config: AccumulationConfig) -> RunRecord:
    """Train the three regimes from the same initial weights on the same examples; see module doc."""
    _check_config(config)
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
        learning_rates={r: v[5] for r, v in results.items()},
        **extra,
    )


def bug_symptoms(record: RunRecord) -> list[str]:
    """One plain sentence per bug switched on, with the number that gives it away."""
    if not isinstance(record, RunRecord):
        raise TypeError(f"record must be a RunRecord (from run_regimes), got {type(record).__name__}")
    c, out, scales = record.config, [], record.grad_scale
    K, tail, bugs = c.accumulation_steps, c.tail_micro_batches, c.bugs
    steps = record.optimizer_steps
    counted = f"optimizer steps: accumulated {steps['accumulated']}, big batch {steps['big_batch']}"
    if bugs & {"loss_not_divided", "loss_divided_twice"} and scales:
        out.append(f"update 0 applied {scales[0]:.3g} x the big-batch gradient (K = {K})")
        if c.max_grad_norm is not None and record.allclose:
            out.append(f"clipping to max_grad_norm = {c.max_grad_norm:g} cut both gradients to the same length, "
                       "which hides this bug: the direction was right, only the length was wrong")
    if "zero_grad_every_micro_step" in bugs and scales:
        out.append(f"update 0 applied only the last micro-batch's share: {scales[0]:.3g} x the big-batch size")
    if "step_every_micro_step" in bugs:
        out.append(counted)
    if "forget_final_step" in bugs:
        out.append(f"the final group of {tail} micro-batch(es) never got its step; {counted}")
    if "tail_divided_by_k" in bugs and len(scales) == c.total_updates:
        share = f" = {tail}/{K}" if c.max_grad_norm is None else " (after clipping)"
        out.append(f"the final group of {tail} micro-batch(es) applied {scales[-1]:.3g}{share} x its big-batch "
                   "gradient, not 1")
    if "log_divided_loss" in bugs and record.true_train_loss:
        logged, true = record.train_loss["accumulated"][0], record.true_train_loss[0]
        out.append(f"logged train_loss at update 0 = {logged:.4g}, true mean = {true:.4g}: "
                   f"{true / logged:.3g} x too small; the gradients are unaffected")
    if "clip_every_micro_step" in bugs:
        once = clip_flat(record.first_target, c.max_grad_norm)
        off = float((record.first_pile.accumulated - once).norm() / once.norm())
        out.append(f"clipped every micro-step, update 0's gradient is off by {off:.1%} of the once-clipped gradient")
    if "scheduler_every_micro_step" in bugs:
        full = {r: next((u for u, lr in enumerate(v) if lr >= c.learning_rate), None)
                for r, v in record.learning_rates.items()}
        out.append(f"warmup of {c.warmup_updates} updates: full learning rate from update {full['accumulated']} "
                   f"(accumulated) instead of {full['big_batch']} (big batch)")
    return out
