"""Three regimes from the same weights, recorded update by update, each a loop of `widgets.core.loops`.

- accumulated: K micro-batches of b examples per update (the config's mistake's loop, if it names one);
- big_batch:   the same K*b examples in one pass per update (what accumulation imitates);
- small_batch: only the first micro-batch of each window (no accumulation).

What a `RunRecord` holds is measured from outside the loop, by the loss function handed to it and
hooks on the parameters and the optimizer (`_Watch`), which never change `.grad` or the weights.
"""
from __future__ import annotations

import functools
import math
import warnings
from dataclasses import dataclass
from typing import Callable

import torch

from widgets.core.accumulation import (
    GradientPile,
    compare_gradients,
    flat_parameter_indices,
    flat_weights,
    make_model,
    make_regression_data,
    windows,
)
from widgets.core.config import OPTIMIZERS, AccumulationConfig, check_config, check_int
from widgets.core.loops import train
from widgets.core.mistakes import MISTAKES
from widgets.core.torch_state import known_torch_state

REGIMES = ("accumulated", "big_batch", "small_batch")
# A run has diverged once its loss on all examples is not finite or above this many times its start:
# a float32 run can blow up by 1e30 and stay finite, and its gradients then still "allclose".
DIVERGED_LOSS_FACTOR = 1000.0
# The entries of `.grad` the pile plots follow: (parameter name, element), found by name in the model.
PLOTTED_ENTRIES = (("0.weight", 0), ("2.weight", 0), ("2.bias", 0))


def mse(prediction: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Mean squared error, reduced by the mean over examples: the scaling below assumes a mean."""
    return torch.nn.functional.mse_loss(prediction, target)


def linear_warmup(warmup_updates: int) -> Callable[[int], float]:
    """The LambdaLR factor after n scheduler steps: (n+1)/(W+1) while n < W, then 1 (W updates ramp up)."""
    check_int("warmup_updates", warmup_updates, 0)
    return lambda n: min(1.0, (n + 1) / (warmup_updates + 1))


def clip_flat(grad: torch.Tensor, max_norm: float | None) -> torch.Tensor:
    """A flat gradient clipped as `torch.nn.utils.clip_grad_norm_` would clip it (None: unchanged)."""
    if max_norm is None:
        return grad
    return grad * min(1.0, max_norm / (float(grad.norm()) + 1e-6))  # the same 1e-6 torch adds


def _flat(tensors) -> torch.Tensor:
    """Tensors as one flat detached copy (the watch's own, unchecked `flat_grad`); shape (P,)."""
    return torch.cat([t.detach().reshape(-1) for t in tensors])


# --- what a run returns -----------------------------------------------------------------------------

@dataclass
class RegimeRun:
    """One regime's run, one entry per update (up to the update where it diverged, if it did)."""

    train_loss: list[float]  # the loss the loop logged (its return value), for each update it made
    eval_loss: list[float]  # the loss on all examples after each update
    grad_norm: list[float]  # the norm of the completed gradient, before clipping
    learning_rates: list[float]  # the rate each update used
    optimizer_steps: int  # every optimizer.step() call, buggy ones included
    diverged_at: int | None  # the first update whose loss was not finite or over DIVERGED_LOSS_FACTOR x its start
    final_weights: torch.Tensor  # all parameters, flat, when the run ended (or diverged); (P,)
    update_flags: list[bool]  # per micro-step: did the update's own step happen there?
    first_pile: GradientPile | None  # .grad after each backward pass of the first update (with references only)
    first_target: torch.Tensor | None  # the big-batch gradient the first pile should reach; (P,)
    first_applied: torch.Tensor | None  # the gradient update 0's optimizer.step() used (after any clip); (P,)
    start_loss: float  # the loss on all examples before training
    grad_diff: list[float]
    grads_match: list[bool]
    grad_scale: list[float]
    true_train_loss: list[float]


# --- the watch: measurements taken from outside the loop ----------------------------------------------

class _Watch:
    """Measures one loop's run from outside: through the `loss` it hands the loop (micro-steps, losses,
    and with `references`, the big-batch gradient as each update begins) and hooks on the parameters
    and the optimizer. Its own passes touch no `.grad`, so no hook sees them."""

    def __init__(self, model, optimizer, batches, accumulation_steps, x, y, max_norm, start_loss, references=None):
        self.model, self.optimizer, self.x, self.y, self.max_norm = model, optimizer, x, y, max_norm
        self.targets, self.K, self.references = [t for _, t in batches], accumulation_steps, references
        update_windows = windows(len(batches), accumulation_steps)
        self.ends = {window[-1] for window in update_windows}  # each update's last micro-step
        self.weights = []  # n_i / n: each micro-batch's share of its window's examples
        for window in update_windows:
            items = sum(len(self.targets[i]) for i in window)
            self.weights += [len(self.targets[i]) / items for i in window]
        self.micro_step, self.backward_hooks, self.stopped = 0, 0, False
        self.params = list(model.parameters())
        self.steps, self.stepped_at, self.diverged_at, self.final_weights = 0, [], None, None
        self.eval_loss, self.grad_norm, self.learning_rates, self.true_train_loss = [], [], [], []
        self.grad_diff, self.grads_match, self.grad_scale, self.snapshots = [], [], [], []
        self.first_applied, self.pile, self.true_sum = None, None, 0.0
        self.start_loss = start_loss  # the loss on all examples at the seeded weights, the same for every regime
        self.handles = [optimizer.register_step_post_hook(self._after_step)]
        self.handles += [p.register_post_accumulate_grad_hook(self._after_accumulate) for p in self.params]

    def _loss_on_all(self) -> float:
        with torch.no_grad():
            return mse(self.model(self.x), self.y).item()

    def _reference(self, inputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """The big-batch gradient at the current weights, leaving `.grad` as the loop left it."""
        grads = torch.autograd.grad(mse(self.model(inputs), targets), self.params)  # not into .grad
        return _flat(grads)

    def loss(self, output: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """`mse` for the loop, noted as it computes it: one call per micro-step, after its forward
        pass and before its backward pass, so the weights are still those the micro-step began with."""
        loss = mse(output, targets)
        if self.stopped:
            return loss
        if self.micro_step % self.K == 0:  # an update begins: what it must reach, from these weights
            self.true_sum = 0.0
            if self.references is not None:
                self.reference = self._reference(*self.references[self.micro_step // self.K])
                if self.micro_step == 0:
                    self.first_target = self.reference
        self.true_sum += loss.item() * self.weights[self.micro_step]  # the update's mean loss, whatever is logged
        self.micro_step += 1
        return loss

    def _after_accumulate(self, parameter) -> None:
        if self.stopped:
            return
        self.backward_hooks += 1
        if self.backward_hooks == len(self.params):  # every parameter has its .grad: the pile after this backward
            self.backward_hooks = 0
            # copied only where read: at an update's end (its norm) and, for the record's first pile, in update 0
            first = self.references is not None and self.micro_step <= self.K
            if first or self.micro_step - 1 in self.ends:
                self.pile = _flat(p.grad for p in self.params)
            if first:
                self.snapshots.append(self.pile)

    def _after_step(self, optimizer, args, kwargs) -> None:
        """After optimizer.step(), before zero_grad: `.grad` still holds what the step used."""
        if self.stopped:
            return
        self.steps += 1
        micro_step = self.micro_step - 1
        if micro_step in self.ends and micro_step not in self.stepped_at:  # the update's own step
            self.stepped_at.append(micro_step)
            self._update_done(_flat(p.grad for p in self.params) if self.references is not None else None)

    def _update_done(self, applied: torch.Tensor | None) -> None:
        if applied is not None:
            target = clip_flat(self.reference, self.max_norm)  # what a correct step applies
            diff, match = compare_gradients(applied, target)
            self.grad_diff.append(diff)
            self.grads_match.append(match)
            target_norm = float(target.norm())
            self.grad_scale.append(float(applied.norm()) / target_norm if target_norm > 0 else math.nan)
            if self.first_applied is None:
                self.first_applied = applied
        norm = float(self.pile.norm())
        self.grad_norm.append(norm)
        self.true_train_loss.append(self.true_sum)
        self.learning_rates.append(self.optimizer.param_groups[0]["lr"])
        self.eval_loss.append(self._loss_on_all())
        blown_up = self.eval_loss[-1] > DIVERGED_LOSS_FACTOR * self.start_loss
        if not all(math.isfinite(v) for v in (self.true_sum, self.eval_loss[-1], norm)) or blown_up:
            self.diverged_at = len(self.eval_loss) - 1
            self.final_weights = flat_weights(self.model)
            self.stopped = True  # the loop runs on; nothing after this update is measured

    def finish(self, logged: list[float]) -> RegimeRun:
        for handle in self.handles:
            handle.remove()
        if not self.stopped and len(self.eval_loss) < len(self.ends):  # the forgotten final step
            self._update_done(torch.zeros_like(self.reference) if self.references is not None else None)
        stepped = set(self.stepped_at)
        final = self.final_weights if self.final_weights is not None else flat_weights(self.model)
        size = len(self.targets[0])
        return RegimeRun(
            train_loss=logged[: len(self.eval_loss)], eval_loss=self.eval_loss, grad_norm=self.grad_norm,
            learning_rates=self.learning_rates, optimizer_steps=self.steps, diverged_at=self.diverged_at,
            final_weights=final, update_flags=[i in stepped for i in range(self.micro_step)],
            first_pile=GradientPile(torch.stack(self.snapshots), (size,) * len(self.snapshots)) if self.snapshots else None,
            first_target=getattr(self, "first_target", None), first_applied=self.first_applied,
            grad_diff=self.grad_diff, grads_match=self.grads_match, grad_scale=self.grad_scale,
            true_train_loss=self.true_train_loss, start_loss=self.start_loss,
        )


def make_optimizer(name: str, parameters, learning_rate: float) -> torch.optim.Optimizer:
    """The optimizer a config names (`OPTIMIZERS`), with torch's defaults besides the rate."""
    return getattr(torch.optim, OPTIMIZERS[name])(parameters, lr=learning_rate)


def _train(config: AccumulationConfig, start_loss: float, batches: list, accumulation_steps: int,
           x: torch.Tensor, y: torch.Tensor, *, loop: Callable = train,
           references: list | None = None) -> RegimeRun:
    """One regime: `loop` from the seeded weights with the config's optimizer, warmup and clip, watched."""
    model = make_model(config.seed)
    optimizer = make_optimizer(config.optimizer, model.parameters(), config.learning_rate)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, linear_warmup(config.warmup_updates))
    watch = _Watch(model, optimizer, batches, accumulation_steps, x, y, config.max_grad_norm, start_loss, references)
    with warnings.catch_warnings():  # scheduler_every_micro_step steps the warmup before the first
        warnings.filterwarnings("ignore", "Detected call of `lr_scheduler.step", UserWarning)  # update: the bug
        logged = loop(model, optimizer, watch.loss, batches, accumulation_steps, scheduler,
                      max_norm=config.max_grad_norm)
    return watch.finish(logged)


# --- the record -----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class RunRecord:
    """What one `run_regimes` call measured, per regime (dicts) and per update (lists)."""

    config: AccumulationConfig
    train_loss: dict[str, list[float]]  # what each loop logged per update (log_divided_loss: divided once more)
    eval_loss: dict[str, list[float]]  # the loss on all examples after each update
    grad_norm: dict[str, list[float]]  # the completed gradient's norm, before clipping
    grad_diff: list[float]  # max |accumulated - big-batch| as each step used them, at the accumulated weights
    grads_match: list[bool]
    passes_per_update: dict[str, int]
    optimizer_steps: dict[str, int]
    update_flags: list[bool]  # one per micro-step of the accumulated run: did it end an update?
    first_pile: GradientPile  # .grad after each micro-step of the first update
    first_target: torch.Tensor  # the big-batch gradient the first pile should reach; (P,)
    first_applied: torch.Tensor  # the gradient update 0's step used, after any clip (zeros if it never stepped); (P,)
    initial_eval_loss: float
    # the update whose loss stopped being finite or passed DIVERGED_LOSS_FACTOR x its start: its lists end there
    diverged_at: dict[str, int | None]
    learning_rates: dict[str, list[float]]  # the rate each update used
    true_train_loss: list[float]  # the accumulated run's real mean loss per update, whatever it logged
    grad_scale: list[float]  # |applied| / |big-batch| gradient (K with loss_not_divided, 0 for a forgotten step)
    plotted_parameters: dict[str, int]  # a label ("0.weight[0]") -> its index in the flat gradients
    final_weights: dict[str, torch.Tensor]  # each run's parameters, flat, when it ended

    @property
    def both_diverged(self) -> bool:
        """Did the accumulated and the big-batch run both blow up? Then their gradients, however
        close in relative terms, say nothing about accumulation."""
        return self.diverged_at["accumulated"] is not None and self.diverged_at["big_batch"] is not None

    @property
    def weight_gap(self) -> float:
        """How far the accumulated run ended from the big-batch run, in units of how far the big-batch
        run moved from the start: |w_acc - w_big| / |w_big - w_0|. 0: the same training."""
        start = flat_weights(make_model(self.config.seed))
        moved = float((self.final_weights["big_batch"] - start).norm())
        gap = float((self.final_weights["accumulated"] - self.final_weights["big_batch"]).norm())
        return gap / moved if moved > 0 else math.nan

    @property
    def max_grad_diff(self) -> float:
        """The largest |accumulated - big-batch| over the whole run (nan if any update's was nan)."""
        if not self.grad_diff:
            return math.nan
        return math.nan if any(math.isnan(d) for d in self.grad_diff) else max(self.grad_diff)

    @property
    def grads_allclose(self) -> bool:
        """Was every applied gradient of the accumulated run allclose the big-batch gradient?"""
        return all(self.grads_match) and self.diverged_at["accumulated"] is None

    @property
    def learning_rates_match(self) -> bool:
        """Did every update both runs made use the same learning rate in both?"""
        pairs = zip(self.learning_rates["accumulated"], self.learning_rates["big_batch"])
        return all(a == big for a, big in pairs)

    @property
    def matches_big_batch(self) -> bool:
        """Did every update equal the big-batch update: gradients allclose and the same learning rate?
        The log is not part of it: see `log_matches`."""
        return self.grads_allclose and self.learning_rates_match

    @property
    def log_matches(self) -> bool:
        """Did the accumulated run log its true mean loss at every update?"""
        logged, true = self.train_loss["accumulated"], self.true_train_loss
        return len(logged) == len(true) and all(math.isclose(a, b, rel_tol=1e-6) for a, b in zip(logged, true))


def example_order(config: AccumulationConfig) -> torch.Tensor:
    """The order examples are drawn in: a seeded permutation, repeated as often as the run needs."""
    return _example_order(check_config(config))


def _example_order(config: AccumulationConfig) -> torch.Tensor:
    g = torch.Generator().manual_seed(config.seed + 1)
    needed = config.total_micro_steps * config.micro_batch_size
    reps = -(-needed // config.num_examples)
    return torch.cat([torch.randperm(config.num_examples, generator=g) for _ in range(reps)])[:needed]


def run_regimes(config: AccumulationConfig) -> RunRecord:
    """Train the three regimes from the same initial weights on the same draws, under the lab's torch state."""
    check_config(config)
    with known_torch_state():
        return _run_regimes(config)


@functools.lru_cache(maxsize=1)
def _plotted_indices() -> tuple[tuple[str, int], ...]:
    """Where `PLOTTED_ENTRIES` sit in the flat gradients: the model's shape, not its seed, decides."""
    return tuple(flat_parameter_indices(make_model(0), PLOTTED_ENTRIES).items())


def _plotted_parameters() -> dict[str, int]:
    return dict(_plotted_indices())  # a fresh dict per record: a caller may change its own


def _run_regimes(config: AccumulationConfig) -> RunRecord:
    x, y = make_regression_data(config.num_examples, config.seed)
    order, K, b = _example_order(config), config.accumulation_steps, config.micro_batch_size
    drawn_x, drawn_y = x[order], y[order]  # every draw in order: views of these are the batches
    micro = list(zip(drawn_x.split(b), drawn_y.split(b)))  # micro-step i draws examples order[i*b : (i+1)*b]
    big = list(zip(drawn_x.split(K * b), drawn_y.split(K * b)))  # each update's K micro-batches in one batch
    with torch.no_grad():
        start_loss = mse(make_model(config.seed)(x), y).item()  # every regime starts there: measured once
    runs: dict[str, RegimeRun] = {
        "accumulated": _train(config, start_loss, micro, K, x, y, loop=train if config.mistake is None else MISTAKES[config.mistake].loop, references=big),
        "big_batch": _train(config, start_loss, big, 1, x, y),
        "small_batch": _train(config, start_loss, micro[::K], 1, x, y),  # the first micro-batch of each update
    }
    accumulated = runs["accumulated"]
    return RunRecord(
        config=config,
        train_loss={r: run.train_loss for r, run in runs.items()},
        eval_loss={r: run.eval_loss for r, run in runs.items()},
        grad_norm={r: run.grad_norm for r, run in runs.items()},
        passes_per_update={"accumulated": K, "big_batch": 1, "small_batch": 1},
        optimizer_steps={r: run.optimizer_steps for r, run in runs.items()},
        initial_eval_loss=runs["big_batch"].start_loss,
        diverged_at={r: run.diverged_at for r, run in runs.items()},
        learning_rates={r: run.learning_rates for r, run in runs.items()},
        update_flags=accumulated.update_flags,
        first_pile=accumulated.first_pile,
        first_target=accumulated.first_target,
        first_applied=accumulated.first_applied,
        grad_diff=accumulated.grad_diff,
        grads_match=accumulated.grads_match,
        grad_scale=accumulated.grad_scale,
        true_train_loss=accumulated.true_train_loss,
        plotted_parameters=_plotted_parameters(),
        final_weights={r: run.final_weights for r, run in runs.items()},
    )
