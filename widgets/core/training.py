"""Three regimes from the same weights, each a loop of `widgets.core.loops`, recorded update by update:
accumulated (K micro-batches of b per update, the config's mistake's loop if it names one), big_batch (the
same K*b examples in one pass, what accumulation imitates) and small_batch (the first micro-batch of each
window). A `_Watch` measures each run from outside, through the loss handed to the loop and hooks that never
change `.grad` or the weights, under `known_torch_state` (a learner's float16 default flips no verdict)."""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import math
import warnings
from dataclasses import dataclass
from typing import Callable, Iterator

import torch

from widgets.core import loops
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

REGIMES = ("accumulated", "big_batch", "small_batch")
# A run has diverged once its loss on all examples is not finite or above this many times its start:
# a float32 run can blow up by 1e30 and stay finite, and its gradients then still "allclose".
DIVERGED_LOSS_FACTOR = 1000.0
# The entries of `.grad` the pile plots follow: (parameter name, element), found by name in the model.
PLOTTED_ENTRIES = (("0.weight", 0), ("2.weight", 0), ("2.bias", 0))


@contextlib.contextmanager
def torch_threads(count: int | None = 1) -> Iterator[None]:
    """Run the block with `count` torch threads (None: as they are), then give the caller's count back.

    The lab's tiny models run fastest on one thread, above all on a shared CPU."""
    before = torch.get_num_threads()
    if count is not None and count != before:  # a change rebuilds torch's thread pool: only when needed
        torch.set_num_threads(count)
    try:
        yield
    finally:
        if torch.get_num_threads() != before:
            torch.set_num_threads(before)


def one_thread() -> contextlib.AbstractContextManager:
    """`torch_threads(1)`: one thread for the block, the caller's count after."""
    return torch_threads(1)


@contextlib.contextmanager
def known_torch_state(threads: int | None = 1) -> Iterator[None]:
    """Grad on, inference mode off, float32 on the CPU, deterministic and anomaly flags off, `threads` threads;
    the caller's state after."""
    dtype, device = torch.get_default_dtype(), torch.get_default_device()
    deterministic = torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled()
    try:
        torch.set_default_dtype(torch.float32)
        if device.type != "cpu":  # set only when needed: a default device is a mode on every call
            torch.set_default_device("cpu")
        if deterministic[0]:  # the first call imports torch._inductor (seconds): only when it changes something
            torch.use_deterministic_algorithms(False)
        # each of these gives the caller's setting back on exit, also one the block changed
        with torch_threads(threads), torch.inference_mode(False), torch.enable_grad(), \
                torch.autograd.set_detect_anomaly(False):
            yield
    finally:
        torch.set_default_dtype(dtype)
        if device.type != "cpu":
            torch.set_default_device(device)
        if (torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled()) \
                != deterministic:
            torch.use_deterministic_algorithms(deterministic[0], warn_only=deterministic[1])


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
    """Tensors as one flat detached copy; shape (P,)."""
    return torch.cat([t.detach().reshape(-1) for t in tensors])


class _Watch:
    """Measures one loop's run from outside: through the `loss` it hands the loop (micro-steps, losses,
    and with `references`, the big-batch gradient as each update begins) and hooks on the parameters
    and the optimizer. Its own passes touch no `.grad`, so no hook sees them. Its lists hold one entry
    per update, up to the update where the run diverged, if it did."""

    def __init__(self, model, optimizer, batches, accumulation_steps, x, y, max_norm, start_loss, references=None):
        self.model, self.optimizer, self.x, self.y, self.max_norm = model, optimizer, x, y, max_norm
        self.K, self.references, self.start_loss = accumulation_steps, references, start_loss
        self.micro_batch_size = len(batches[0][1])
        self.ends, self.weights = set(), []  # each update's last micro-step; n_i / n of each micro-batch
        for window in windows(len(batches), accumulation_steps):
            self.ends.add(window[-1])
            items = sum(len(batches[i][1]) for i in window)
            self.weights += [len(batches[i][1]) / items for i in window]
        self.micro_step, self.backward_hooks, self.stopped = 0, 0, False
        self.params = list(model.parameters())
        self.steps, self.stepped_at, self.diverged_at, self.final_weights = 0, set(), None, None
        self.eval_loss, self.learning_rates, self.true_train_loss = [], [], []
        self.grad_diff, self.grads_match, self.grad_scale, self.snapshots = [], [], [], []
        self.first_target, self.first_applied, self.pile, self.true_sum = None, None, None, 0.0
        self.handles = [optimizer.register_step_post_hook(self._after_step)]
        self.handles += [p.register_post_accumulate_grad_hook(self._after_accumulate) for p in self.params]

    def loss(self, output: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """`mse` for the loop, noted as it computes it: one call per micro-step, after its forward
        pass and before its backward pass, so the weights are still those the micro-step began with."""
        loss = mse(output, targets)
        if self.stopped:
            return loss
        if self.micro_step % self.K == 0:  # an update begins: what it must reach, from these weights
            self.true_sum = 0.0
            if self.references is not None:
                inputs, targets = self.references[self.micro_step // self.K]
                # the big-batch gradient at these weights, not into .grad
                self.reference = _flat(torch.autograd.grad(mse(self.model(inputs), targets), self.params))
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
            self.stepped_at.add(micro_step)
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
        self.true_train_loss.append(self.true_sum)
        self.learning_rates.append(self.optimizer.param_groups[0]["lr"])
        with torch.no_grad():
            self.eval_loss.append(mse(self.model(self.x), self.y).item())
        blown_up = self.eval_loss[-1] > DIVERGED_LOSS_FACTOR * self.start_loss
        finite = all(math.isfinite(v) for v in (self.true_sum, self.eval_loss[-1], float(self.pile.norm())))
        if not finite or blown_up:
            self.diverged_at = len(self.eval_loss) - 1
            self.final_weights = flat_weights(self.model)
            self.stopped = True  # the loop runs on; nothing after this update is measured

    def finish(self, logged: list[float]) -> _Watch:
        """Stop watching; what the loop `logged`, one entry per measured update."""
        for handle in self.handles:
            handle.remove()
        if not self.stopped and len(self.eval_loss) < len(self.ends):  # the forgotten final step
            self._update_done(torch.zeros_like(self.reference) if self.references is not None else None)
        if self.final_weights is None:
            self.final_weights = flat_weights(self.model)
        self.train_loss = logged[: len(self.eval_loss)]
        sizes = (self.micro_batch_size,) * len(self.snapshots)
        self.first_pile = GradientPile(torch.stack(self.snapshots), sizes) if self.snapshots else None
        return self


def make_optimizer(name: str, parameters, learning_rate: float) -> torch.optim.Optimizer:
    """The optimizer a config names (`OPTIMIZERS`), with torch's defaults besides the rate."""
    return getattr(torch.optim, OPTIMIZERS[name])(parameters, lr=learning_rate)


def _train(config: AccumulationConfig, start_loss: float, batches: list, accumulation_steps: int,
           x: torch.Tensor, y: torch.Tensor, *, loop: Callable = loops.train, references: list | None = None) -> _Watch:
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


@dataclass(frozen=True)
class RunRecord:
    """What one `run_regimes` call measured, per regime (dicts) and per update (lists)."""

    config: AccumulationConfig
    train_loss: dict[str, list[float]]  # what each loop logged per update (log_divided_loss: divided once more)
    eval_loss: dict[str, list[float]]  # the loss on all examples after each update
    grad_diff: list[float]  # max |accumulated - big-batch| as each step used them, at the accumulated weights
    grads_match: list[bool]
    passes_per_update: dict[str, int]
    optimizer_steps: dict[str, int]  # every optimizer.step() call, buggy ones included
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
    start_weights: torch.Tensor  # the parameters every run started from, flat

    @property
    def both_diverged(self) -> bool:
        """Did both the accumulated and the big-batch run blow up? Then their gradients say nothing about accumulation."""
        return self.diverged_at["accumulated"] is not None and self.diverged_at["big_batch"] is not None

    @property
    def weight_gap(self) -> float:
        """|w_acc - w_big| / |w_big - w_0|: how far the accumulated run ended from the big-batch run (0: the same)."""
        moved = float((self.final_weights["big_batch"] - self.start_weights).norm())
        gap = float((self.final_weights["accumulated"] - self.final_weights["big_batch"]).norm())
        return gap / moved if moved > 0 else math.nan

    @property
    def max_grad_diff(self) -> float:
        """The largest |accumulated - big-batch| over the whole run (nan if any update's was nan)."""
        if not self.grad_diff or any(math.isnan(d) for d in self.grad_diff):
            return math.nan
        return max(self.grad_diff)

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
        """Gradients allclose and the same learning rate at every update (the log is `log_matches`)."""
        return self.grads_allclose and self.learning_rates_match

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


@dataclass(frozen=True)
class _Draws:
    """What every regime of one setting trains on: the data, its batches, the start and its loss."""

    x: torch.Tensor
    y: torch.Tensor
    micro: list  # (inputs, targets) of each micro-step
    big: list  # (inputs, targets) of each update: its K micro-batches in one batch
    start: torch.nn.Module
    start_loss: float


@functools.lru_cache(maxsize=8)
def _draws_and_references(config: AccumulationConfig) -> tuple[_Draws, dict[str, _Watch]]:
    """The draws and the big-batch and small-batch runs of a mistake-free `config`. No mistake changes them, and
    the mistake is the setting a learner switches most: the next one trains the accumulated run alone."""
    with known_torch_state():
        x, y = make_regression_data(config.num_examples, config.seed)
        order, K, b = example_order(config), config.accumulation_steps, config.micro_batch_size
        drawn_x, drawn_y = x[order], y[order]  # every draw in order: views of these are the batches
        micro = list(zip(drawn_x.split(b), drawn_y.split(b)))  # micro-step i draws examples order[i*b : (i+1)*b]
        big = list(zip(drawn_x.split(K * b), drawn_y.split(K * b)))  # each update's K micro-batches in one batch
        start = make_model(config.seed)
        with torch.no_grad():
            start_loss = mse(start(x), y).item()  # every regime starts there: measured once
        return _Draws(x, y, micro, big, start, start_loss), {
            "big_batch": _train(config, start_loss, big, 1, x, y),
            "small_batch": _train(config, start_loss, micro[::K], 1, x, y),  # the first micro-batch of each update
        }


def run_regimes(config: AccumulationConfig) -> RunRecord:
    """Train the three regimes from the same initial weights on the same draws, under the lab's torch state."""
    check_config(config)
    draws, references = _draws_and_references(dataclasses.replace(config, mistake=None))
    x, y, start, K = draws.x, draws.y, draws.start, config.accumulation_steps
    with known_torch_state():
        mistake = loops.train if config.mistake is None else getattr(loops, config.mistake)
        runs = {"accumulated": _train(config, draws.start_loss, draws.micro, K, x, y, loop=mistake,
                                      references=draws.big), **references}
    accumulated = runs["accumulated"]
    return RunRecord(
        config=config,
        train_loss={r: run.train_loss for r, run in runs.items()},
        eval_loss={r: run.eval_loss for r, run in runs.items()},
        passes_per_update={"accumulated": K, "big_batch": 1, "small_batch": 1},
        optimizer_steps={r: run.steps for r, run in runs.items()},
        initial_eval_loss=draws.start_loss,
        diverged_at={r: run.diverged_at for r, run in runs.items()},
        learning_rates={r: run.learning_rates for r, run in runs.items()},
        first_pile=accumulated.first_pile,
        first_target=accumulated.first_target,
        first_applied=accumulated.first_applied,
        grad_diff=accumulated.grad_diff,
        grads_match=accumulated.grads_match,
        grad_scale=accumulated.grad_scale,
        true_train_loss=accumulated.true_train_loss,
        plotted_parameters=flat_parameter_indices(start, PLOTTED_ENTRIES),  # the model's shape decides, not its seed
        final_weights={r: run.final_weights for r, run in runs.items()},
        start_weights=flat_weights(start),
    )
