"""Three ways to train the same model on the same data, recorded update by update.

- accumulated: K micro-batches of b examples, one optimizer step per K micro-steps;
- big_batch:   the same K*b examples in one pass, one step (what accumulation imitates);
- small_batch: only the first micro-batch of each group, one step each (no accumulation).

All three clip the gradient once per update (`max_grad_norm`) and step the learning-rate warmup
once per update (`warmup_updates`), when the config asks for them. `run_regimes` returns a
`RunRecord` (numbers and tensors, never a figure): the plots, the explorer and the tests read it.

Read `_train_accumulated` for the loop itself: the correct loop, on one screen. A bug never adds a
branch to it: it swaps one of the `LoopRules` (the loss scale, the boundary, what happens before
the forward or after the backward, the clip, the log), see `widgets.core.loop_rules`. What the
record holds is measured from outside the loop by a probe that never changes `.grad` or the weights.
`widgets.core.symptoms` reads a record back as sentences; `widgets.core.equal_examples` races the
regimes at equal examples.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import torch

from widgets.core.accumulation import (
    GradientPile,
    big_batch_gradient,
    compare_gradients,
    flat_grad,
    flat_parameter_indices,
    flat_weights,
    group_size,
    make_model,
    make_regression_data,
)
from widgets.core.config import AccumulationConfig, check_config, checked, real, whole
from widgets.core.loop_rules import LoopRules, Training, clip_completed_pile, loop_rules
from widgets.core.threads import one_thread

REGIMES = ("accumulated", "big_batch", "small_batch")
# A run has diverged once its loss on all examples is not finite or above this many times its start:
# a float32 run can blow up by 1e30 and stay finite, and its gradients then still "allclose".
DIVERGED_LOSS_FACTOR = 1000.0
# The entries of `.grad` the pile plots follow: (parameter name, element), found by name in the model.
PLOTTED_ENTRIES = (("0.weight", 0), ("2.weight", 0), ("2.bias", 0))


def mse(prediction: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Mean squared error, reduced by the mean over examples: the scaling below assumes a mean."""
    return torch.nn.functional.mse_loss(prediction, target)


@checked(warmup_updates=whole(0))
def linear_warmup(warmup_updates: int) -> Callable[[int], float]:
    """The learning-rate factor after n scheduler steps, for `torch.optim.lr_scheduler.LambdaLR`.

    Stepped once per update, update u (from 0) runs at (u+1)/(W+1) of the rate while u < W,
    then at the full rate: W updates ramp up. Stepped every micro-step, the ramp ends K x sooner.
    """
    return lambda n: min(1.0, (n + 1) / (warmup_updates + 1))


@checked(max_norm=real(0.0, math.inf, optional=True))
def clip_flat(grad: torch.Tensor, max_norm: float | None) -> torch.Tensor:
    """A flat gradient clipped as `torch.nn.utils.clip_grad_norm_` would clip it (None: unchanged)."""
    if max_norm is None:
        return grad
    return grad * min(1.0, max_norm / (float(grad.norm()) + 1e-6))  # the same 1e-6 torch adds


# --- what a run returns -----------------------------------------------------------------------------

@dataclass(frozen=True)
class RegimeRun:
    """One regime's run, one entry per update (up to the update where it diverged, if it did)."""

    train_loss: list[float]  # the loss the run logged for each update
    eval_loss: list[float]  # the loss on all examples after each update
    grad_norm: list[float]  # the norm of the completed gradient, before clipping
    learning_rates: list[float]  # the rate each update used
    optimizer_steps: int  # every optimizer.step() call, buggy ones included
    diverged_at: int | None  # the first update whose loss was not finite or over DIVERGED_LOSS_FACTOR x its start
    final_weights: torch.Tensor  # all parameters, flat, when the run ended; (P,)


@dataclass(frozen=True)
class AccumulatedRun(RegimeRun):
    """The accumulated run, with what it was compared against at every update."""

    update_flags: list[bool] = field(default_factory=list)  # per micro-step: did it end an update?
    first_pile: GradientPile | None = None  # .grad after each micro-step of the first update
    first_target: torch.Tensor | None = None  # the big-batch gradient the first pile should reach; (P,)
    grad_diff: list[float] = field(default_factory=list)
    grads_match: list[bool] = field(default_factory=list)
    grad_scale: list[float] = field(default_factory=list)
    true_train_loss: list[float] = field(default_factory=list)


# --- the examples, in the order every regime draws them ---------------------------------------------

@dataclass(frozen=True)
class _Examples:
    """The data and the order of draws: micro-step i takes examples order[i*b : (i+1)*b]."""

    x: torch.Tensor
    y: torch.Tensor
    order: torch.Tensor
    config: AccumulationConfig

    def micro_batch(self, micro_step: int) -> tuple[torch.Tensor, torch.Tensor]:
        b = self.config.micro_batch_size
        idx = self.order[micro_step * b : (micro_step + 1) * b]
        return self.x[idx], self.y[idx]

    def update_batch(self, update: int, *, micro_batches: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """The examples behind update `update` (all its micro-batches, or only the first few)."""
        c = self.config
        first = update * c.accumulation_steps
        n = group_size(first, c.accumulation_steps, c.total_micro_steps)
        n = n if micro_batches is None else min(n, micro_batches)
        idx = self.order[first * c.micro_batch_size : (first + n) * c.micro_batch_size]
        return self.x[idx], self.y[idx]

    @torch.no_grad()
    def loss_on_all(self, model: torch.nn.Module) -> float:
        return mse(model(self.x), self.y).item()


# The optimizers a config may name. AdamW with torch's defaults (betas 0.9/0.999, eps 1e-8,
# weight_decay 0.01): it divides each step by the gradient's running size, so a constant factor on
# every gradient nearly cancels; eps and the decoupled weight decay are where the scale still shows.
OPTIMIZERS: dict[str, Callable[..., torch.optim.Optimizer]] = {
    "sgd": lambda params, lr: torch.optim.SGD(params, lr=lr),
    "adamw": lambda params, lr: torch.optim.AdamW(params, lr=lr),
}


def _start_training(config: AccumulationConfig) -> Training:
    """The seeded model, the config's optimizer, and the warmup (constant 1 when there is none)."""
    model = make_model(config.seed)
    optimizer = OPTIMIZERS[config.optimizer](model.parameters(), config.learning_rate)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, linear_warmup(config.warmup_updates))
    return Training(model, optimizer, scheduler, config.max_grad_norm)


# --- the loops ----------------------------------------------------------------------------------------

def _train_accumulated(config: AccumulationConfig, examples: _Examples, rules: LoopRules) -> AccumulatedRun:
    """The accumulated regime: K micro-batches of b, one update per K micro-steps. Bugs enter only
    through `rules`; `probe` measures from outside and changes nothing."""
    K, total = config.accumulation_steps, config.total_micro_steps
    training = _start_training(config)
    probe = _AccumulationProbe(examples, training)
    for micro_step in range(total):
        rules.before_forward(training)  # correct: nothing; the pile keeps what it holds
        inputs, targets = examples.micro_batch(micro_step)
        loss = mse(training.model(inputs), targets)
        scale = rules.loss_scale(group_size(micro_step, K, total), K)  # correct: this update's 1/K
        (loss * scale).backward()  # backward adds into .grad: this is the accumulation
        ends_update = rules.is_update_step(micro_step, K, total)  # correct: every K-th and the very last
        rules.after_backward(training, ends_update)  # correct: nothing, the pile is not complete yet
        probe.micro_step_done(micro_step, loss.item(), rules.logged_loss(loss.item(), scale))
        if ends_update:
            norm = rules.clip(training)  # correct: clip once, the completed pile
            training.optimizer.step()  # one update from the whole pile
            if probe.update_applied(micro_step, norm):  # diverged: stop measuring
                break
            training.optimizer.zero_grad(set_to_none=True)  # empty the pile for the next update
            training.scheduler.step()  # the warmup counts updates
    return probe.finish()


def _train_plain(config: AccumulationConfig, examples: _Examples, *, micro_batches: int | None) -> RegimeRun:
    """One pass and one step per update, over the update's examples (big batch: micro_batches=None)
    or only its first micro-batch (small batch: micro_batches=1)."""
    training = _start_training(config)
    log = _UpdateLog(examples, training)
    for update in range(config.total_updates):
        inputs, targets = examples.update_batch(update, micro_batches=micro_batches)
        loss = mse(training.model(inputs), targets)
        loss.backward()
        norm = clip_completed_pile(training)
        training.optimizer.step()
        if log.update_done(loss.item(), norm):
            break
        training.optimizer.zero_grad(set_to_none=True)
        training.scheduler.step()
    return log.finish()


# --- the probes: measurements taken from outside the loops --------------------------------------------

def _is_finite(*values: float) -> bool:
    return all(math.isfinite(v) for v in values)


class _UpdateLog:
    """Per-update measurements of one run; counts every optimizer step through a hook."""

    def __init__(self, examples: _Examples, training: Training):
        self.examples, self.training = examples, training
        self.start_loss = examples.loss_on_all(training.model)
        self.train_loss, self.eval_loss, self.grad_norm, self.learning_rates = [], [], [], []
        self.steps, self.diverged_at = 0, None
        training.optimizer.register_step_post_hook(self._count_step)

    def _count_step(self, optimizer, args, kwargs) -> None:
        self.steps += 1

    def update_done(self, train_loss: float, norm: float) -> bool:
        """Record an update just applied (lr still the one it used); True if the run diverged."""
        self.train_loss.append(train_loss)
        self.grad_norm.append(norm)
        self.learning_rates.append(self.training.optimizer.param_groups[0]["lr"])
        self.eval_loss.append(self.examples.loss_on_all(self.training.model))
        blown_up = self.eval_loss[-1] > DIVERGED_LOSS_FACTOR * self.start_loss
        if not _is_finite(train_loss, self.eval_loss[-1], norm) or blown_up:
            self.diverged_at = len(self.train_loss) - 1
        return self.diverged_at is not None

    def finish(self) -> RegimeRun:
        weights = flat_weights(self.training.model)
        return RegimeRun(self.train_loss, self.eval_loss, self.grad_norm, self.learning_rates, self.steps,
                         self.diverged_at, weights)


class _AccumulationProbe(_UpdateLog):
    """Also compares each applied gradient with the big-batch gradient at the update's starting weights."""

    def __init__(self, examples: _Examples, training: Training):
        super().__init__(examples, training)
        c = examples.config
        self.K, self.total, self.max_norm = c.accumulation_steps, c.total_micro_steps, c.max_grad_norm
        self.stepped_at: list[int] = []
        self.micro_steps = 0
        self.snapshots: list[torch.Tensor] = []
        self.grad_diff, self.grads_match, self.grad_scale, self.true_train_loss = [], [], [], []
        self.true_sum = self.logged_sum = 0.0
        self.open_group = False  # a group has started and not been applied yet
        self._take_reference()
        self.first_target = self.reference

    def _take_reference(self) -> None:
        """The next update's big-batch gradient, at the weights it starts from: taken before its
        first micro-step, since a buggy loop may step inside the group."""
        update = len(self.grad_diff)
        if update < self.examples.config.total_updates:
            self.reference = _reference_gradient(self.training.model, *self.examples.update_batch(update))

    def micro_step_done(self, micro_step: int, mean_loss: float, logged: float) -> None:
        if micro_step % self.K == 0:  # a group begins
            self.true_sum = self.logged_sum = 0.0
            self.open_group = True
        n = group_size(micro_step, self.K, self.total)
        self.true_sum += mean_loss / n  # the undivided mean over the update's examples
        self.logged_sum += logged / n
        if micro_step < self.K:
            self.snapshots.append(flat_grad(self.training.model))
        self.micro_steps += 1

    def update_applied(self, micro_step: int, norm: float) -> bool:
        """After optimizer.step(), before zero_grad: `.grad` still holds what the step used."""
        self.stepped_at.append(micro_step)
        self._compare(flat_grad(self.training.model))
        diverged = self._close_group(norm)
        if not diverged:
            self._take_reference()
        return diverged

    def _compare(self, applied: torch.Tensor) -> None:
        target = clip_flat(self.reference, self.max_norm)  # what a correct step would apply
        diff, match = compare_gradients(applied, target)  # a GradientComparison
        self.grad_diff.append(diff)
        self.grads_match.append(match)
        target_norm = float(target.norm())
        self.grad_scale.append(float(applied.norm()) / target_norm if target_norm > 0 else math.nan)

    def _close_group(self, norm: float) -> bool:
        self.open_group = False
        self.true_train_loss.append(self.true_sum)
        return self.update_done(self.logged_sum, norm)

    def finish(self) -> AccumulatedRun:
        if self.open_group and self.diverged_at is None:  # the forgotten final step: applied nothing
            norm = float(flat_grad(self.training.model).norm())
            self._compare(torch.zeros_like(self.reference))
            self._close_group(norm)
        b = self.examples.config.micro_batch_size
        steps = set(self.stepped_at)
        return AccumulatedRun(
            **vars(super().finish()),
            update_flags=[i in steps for i in range(self.micro_steps)],
            first_pile=GradientPile(torch.stack(self.snapshots), tuple([b] * len(self.snapshots))),
            first_target=self.first_target,
            grad_diff=self.grad_diff,
            grads_match=self.grads_match,
            grad_scale=self.grad_scale,
            true_train_loss=self.true_train_loss,
        )


def _reference_gradient(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """The big-batch gradient at the model's current weights, leaving its `.grad` untouched."""
    saved = [p.grad for p in model.parameters()]
    grad = big_batch_gradient(model, x, y, mse)
    for p, g in zip(model.parameters(), saved):
        p.grad = g
    return grad


# --- the record -----------------------------------------------------------------------------------------

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
    `plotted_parameters` maps a label ("0.weight[0]") to its index in the flat gradients.
    A run that diverged (loss not finite, or over `DIVERGED_LOSS_FACTOR` x its start) stops there.
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
    plotted_parameters: dict[str, int]
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
    def allclose(self) -> bool:
        """The old name of `matches_big_batch`, kept for notebooks that print it; prefer the two
        verdicts `grads_allclose` and `learning_rates_match`, which say one thing each."""
        return self.matches_big_batch

    @property
    def log_matches(self) -> bool:
        """Did the accumulated run log its true mean loss at every update?"""
        logged, true = self.train_loss["accumulated"], self.true_train_loss
        return len(logged) == len(true) and all(math.isclose(a, b, rel_tol=1e-6) for a, b in zip(logged, true))


def example_order(config: AccumulationConfig) -> torch.Tensor:
    """The order examples are drawn in: a seeded permutation, repeated as often as the run needs."""
    check_config(config)
    g = torch.Generator().manual_seed(config.seed + 1)
    needed = config.total_micro_steps * config.micro_batch_size
    reps = -(-needed // config.num_examples)
    return torch.cat([torch.randperm(config.num_examples, generator=g) for _ in range(reps)])[:needed]


def run_regimes(config: AccumulationConfig) -> RunRecord:
    """Train the three regimes from the same initial weights on the same draws; see module doc."""
    check_config(config)
    with one_thread():  # a 49-weight model: a second thread only waits (and stalls on a busy CPU)
        return _run_regimes(config)


def _run_regimes(config: AccumulationConfig) -> RunRecord:
    x, y = make_regression_data(config.num_examples, config.seed)
    examples = _Examples(x, y, example_order(config), config)
    accumulated = _train_accumulated(config, examples, loop_rules(config.bugs))
    runs: dict[str, RegimeRun] = {
        "accumulated": accumulated,
        "big_batch": _train_plain(config, examples, micro_batches=None),
        "small_batch": _train_plain(config, examples, micro_batches=1),
    }
    return RunRecord(
        config=config,
        train_loss={r: run.train_loss for r, run in runs.items()},
        eval_loss={r: run.eval_loss for r, run in runs.items()},
        grad_norm={r: run.grad_norm for r, run in runs.items()},
        passes_per_update={"accumulated": config.accumulation_steps, "big_batch": 1, "small_batch": 1},
        optimizer_steps={r: run.optimizer_steps for r, run in runs.items()},
        initial_eval_loss=examples.loss_on_all(make_model(config.seed)),
        diverged_at={r: run.diverged_at for r, run in runs.items()},
        learning_rates={r: run.learning_rates for r, run in runs.items()},
        update_flags=accumulated.update_flags,
        first_pile=accumulated.first_pile,
        first_target=accumulated.first_target,
        grad_diff=accumulated.grad_diff,
        grads_match=accumulated.grads_match,
        grad_scale=accumulated.grad_scale,
        true_train_loss=accumulated.true_train_loss,
        plotted_parameters=flat_parameter_indices(make_model(config.seed), PLOTTED_ENTRIES),
        final_weights={r: run.final_weights for r, run in runs.items()},
    )
