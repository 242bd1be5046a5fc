"""developer_2's measurements: each line of the loop against the alternative people write, as a table.

Every experiment is seeded and fixed (the lesson's model, mean-squared error, plain SGD at 0.1), so each
table prints the same text on any CPU; the notebook keeps the loop lines a learner reads and these
return what they measure.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass

import torch

from widgets.core import loops
from widgets.core.accumulation import accumulated_gradient, below, flat_grad, flat_weights, is_update_step
from widgets.core.accumulation import make_model, make_regression_data
from widgets.core.config import check_float, check_int
from widgets.core.training import linear_warmup, mse
from widgets.core.views import Table

K = 4  # accumulation_steps of every experiment here
B = 8  # micro_batch_size
ROUNDING = 1e-6  # differences below this are float32 rounding: printed as a bound, never their digits


def sgd(model: torch.nn.Module, lr: float = 0.1, weight_decay: float = 0.0) -> torch.optim.SGD:
    return torch.optim.SGD(model.parameters(), lr=lr, weight_decay=weight_decay)


def micro_batches(x: torch.Tensor, y: torch.Tensor, b: int = B) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """(inputs, targets) pairs of b examples, in order; the last may be shorter."""
    return list(zip(x.split(b), y.split(b)))


def train_big_batch(model, optimizer, x, y, batch_size, *, drop_last=False, scheduler=None, max_norm=None) -> None:
    """The reference: one pass and one step per batch of `batch_size` examples (the last may be short)."""
    for start in range(0, len(x), batch_size):
        if drop_last and start + batch_size > len(x):
            break
        mse(model(x[start : start + batch_size]), y[start : start + batch_size]).backward()
        if max_norm is not None:
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if scheduler is not None:
            scheduler.step()


@dataclass(frozen=True)
class Gap:
    """The largest |weight difference| between a trained model and the big-batch run of the same examples."""

    value: float

    @property
    def matches(self) -> bool:
        return self.value < ROUNDING

    def __str__(self) -> str:
        shown = below(self.value, ROUNDING) if self.matches else f"{self.value:.3g}"
        return f"max |weights - big batch's| {shown} {'✓' if self.matches else '✗'}"


def big_batch_gap(model: torch.nn.Module, num_examples: int = 80, *, drop_last: bool = False,
                  warmup_updates: int = 0, max_norm: float | None = None) -> Gap:
    """`model` (trained from `make_model(seed=0)` on the first `num_examples` examples, K = 4, b = 8) against the
    big-batch run of batches of K·b, with the same drop, warmup and clip."""
    x, y = make_regression_data(num_examples, seed=0)
    big = make_model(seed=0)
    optimizer = sgd(big)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, linear_warmup(warmup_updates)) if warmup_updates else None
    train_big_batch(big, optimizer, x, y, K * B, drop_last=drop_last, scheduler=scheduler, max_norm=max_norm)
    return Gap((flat_weights(model) - flat_weights(big)).abs().max().item())


# --- the short last window ---------------------------------------------------------------------------

def last_window_table() -> Table:
    """80 examples in micro-batches of 8 at K = 4 (a last window of 2): three ways to handle it, each trained
    against the big-batch run it should equal; the note gives (a)'s last pile against one batch of its examples,
    and the weights' own size to read the gaps against."""
    x, y = make_regression_data(80, seed=0)
    batches = micro_batches(x, y)
    ways = {
        "(a) divide by K": (loops.tail_divided_by_k, batches, False),
        "(b) drop the window": (loops.train, batches[:8], True),
        "(c) weight by share": (loops.train, batches, False),
    }
    rows, largest = [], 0.0
    for label, (loop, used, drop_last) in ways.items():
        model = make_model(seed=0)
        loop(model, sgd(model), mse, used, K, max_norm=None)
        largest = max(largest, flat_weights(model).abs().max().item())
        gap = big_batch_gap(model, drop_last=drop_last)
        shown = below(gap.value, ROUNDING) if gap.matches else f"{gap.value:.3g}"
        rows.append([label, shown, "✓" if gap.matches else "✗"])
    tail = accumulated_gradient(make_model(seed=0), x[64:], y[64:], mse, B, divide_loss=False).accumulated / K
    one_batch = accumulated_gradient(make_model(seed=0), x[64:], y[64:], mse, len(x) - 64).accumulated
    factor = (tail @ one_batch / (one_batch @ one_batch)).item()
    note = (f"(a)'s last pile is {factor:.4f} x the gradient of one batch of its {len(x) - 64} examples "
            f"(micro-batches / K = {len(batches) - 8}/{K}), from the same starting weights; the largest trained "
            f"weight is {largest:.2f}")
    return Table(["the last window", "max |weights - big batch's|", "equals the big batch"], rows, note=note)


class _Stream(torch.utils.data.IterableDataset):
    """Examples yielded one by one, as a stream would: no __len__."""

    def __init__(self, x: torch.Tensor, y: torch.Tensor):
        self.x, self.y = x, y

    def __iter__(self):
        yield from zip(self.x, self.y)


def stream_loader() -> torch.utils.data.DataLoader:
    """A DataLoader of micro-batches of 8 over the 80 examples of the short-window experiment, read as a stream:
    it has no len()."""
    return torch.utils.data.DataLoader(_Stream(*make_regression_data(80, seed=0)), batch_size=B)


# --- what to log ---------------------------------------------------------------------------------------

def logging_gap() -> str:
    """`train`'s logged loss (the update's mean) against the tutorial's (the last micro-batch's mean, that is its
    divided loss times K) over 12 updates: how far apart, relative to the mean. One line of text."""
    x, y = make_regression_data(12 * K * B, seed=0)
    batches, micro_losses = micro_batches(x, y), []

    def noted_mse(output, targets):
        loss = mse(output, targets)
        micro_losses.append(loss.item())
        return loss

    model = make_model(seed=0)
    logged = loops.train(model, sgd(model), noted_mse, batches, K, max_norm=None)
    last = [micro_losses[m] for m in range(len(batches)) if is_update_step(m, K, len(batches))]
    gaps = [abs(b - a) / a for a, b in zip(logged, last)]
    return (f"{len(logged)} updates: the last micro-batch's loss (times K) is off the mean by "
            f"{sum(gaps) / len(gaps):.0%} on average, {max(gaps):.0%} at worst")


# --- where to clip ---------------------------------------------------------------------------------------

def _clipped_pile(window, max_norm: float, every_micro_step: bool) -> tuple[torch.Tensor, list[float]]:
    """One update's pile, clipped every micro-step or once; each micro-batch's final weight in it."""
    model = make_model(seed=0)
    shrink = []  # the factor each clip multiplies the whole pile by
    for i, (inputs, targets) in enumerate(window):
        (mse(model(inputs), targets) / len(window)).backward()
        if every_micro_step or i == len(window) - 1:
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm).item()
            shrink.append(min(1.0, max_norm / (norm + 1e-6)))  # the factor clip_grad_norm_ applies
        else:
            shrink.append(1.0)
    n = len(window)  # a micro-batch is shrunk by its own clip and by every later one
    return flat_grad(model), [torch.tensor(shrink[i:]).prod().item() / n for i in range(n)]


def clip_table(max_norm: float = 0.5) -> Table:
    """One update's pile (K = 4) at the starting weights, clipped once or every micro-step to `max_norm`."""
    check_float("max_norm", max_norm, 0.0, 1e6)
    window = micro_batches(*make_regression_data(K * B, seed=0))
    rows = []
    for label, every in (("once per update", False), ("every micro-step", True)):
        pile, weights = _clipped_pile(window, max_norm, every)
        rows.append([label, f"{pile.norm().item():.4f}", ", ".join(f"{w:.4f}" for w in weights)])
    return Table(["clipped", "norm of the pile", "each micro-batch's final weight"], rows)


# --- when to step the schedule -----------------------------------------------------------------------------

@dataclass(frozen=True)
class WarmupRates:
    """The learning rate each update used, the scheduler stepped per update and per micro-step (K = 4)."""

    per_update: list[float]
    per_micro_step: list[float]
    warmup_updates: int
    warned: list[str]  # what torch warned about, first sentence of each

    def full_rate_at(self, rates: list[float]) -> int:
        return rates.index(max(rates))


def rates_used(per_micro_step: bool, warmup_updates: int = 8, num_updates: int = 12) -> list[float]:
    """The rate each of `num_updates` updates (K = 4) used, a linear warmup of `warmup_updates` updates stepped
    once per update or once per micro-step."""
    check_int("num_updates", num_updates, 1, 10_000)
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.1)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, linear_warmup(warmup_updates))
    used = []
    for micro_step in range(K * num_updates):
        if is_update_step(micro_step, K):
            used.append(optimizer.param_groups[0]["lr"])
            optimizer.step()
            if not per_micro_step:
                scheduler.step()  # right: once per update
        if per_micro_step:
            scheduler.step()  # wrong: K times per update
    return used


def warmup_rates() -> WarmupRates:
    """A linear warmup written for 8 updates, stepped once per update and once per micro-step, over 12 updates."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        per_micro_step = rates_used(True)
    warned = sorted({str(w.message).split(". ")[0] for w in caught})
    return WarmupRates(rates_used(False), per_micro_step, 8, warned)


# --- mixed precision -----------------------------------------------------------------------------------------

def _amp_backward(model, inputs, targets, scaler, share: float, blow_up: float = 1.0) -> None:
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = mse(model(inputs), targets) * blow_up  # the linear layers run in bfloat16
    scaler.scale(loss * share).backward()  # the pile holds scale x gradient


def amp_window_table() -> Table:
    """One update of two micro-batches with a CPU GradScaler (scale 1024) under bfloat16 autocast: the scale and
    the pile's norm after each micro-step and after unscale_ (against the float32 pile); a second unscale_."""
    window = micro_batches(*make_regression_data(2 * B, seed=0))
    model = make_model(seed=0)
    optimizer = sgd(model)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**10)
    rows = []
    for micro_step, (inputs, targets) in enumerate(window):
        _amp_backward(model, inputs, targets, scaler, 1 / len(window))
        rows.append([f"backward, micro-step {micro_step}", f"{scaler.get_scale():.0f}",
                     f"{flat_grad(model).norm().item():.2f}"])
    scaler.unscale_(optimizer)  # once, on the completed pile
    x, y = make_regression_data(2 * B, seed=0)
    float32 = accumulated_gradient(make_model(seed=0), x, y, mse, B).accumulated.norm().item()
    rows.append(["unscale_", f"{scaler.get_scale():.0f}",
                 f"{flat_grad(model).norm().item():.4f} (float32 pile: {float32:.4f})"])
    try:
        scaler.unscale_(optimizer)
        again = "accepted"
    except RuntimeError as error:
        again = f"RuntimeError, {str(error).split(' since')[0]}"
    return Table(["call", "scale", "pile norm"], rows, note=f"a second unscale_ before update(): {again}")


def amp_schedule_table() -> Table:
    """Three updates of K = 4 with a CPU GradScaler and a 4-update warmup; micro-step 5 (in update 1) overflows.
    Once the scheduler is stepped at every window's end, once only when the scale did not drop (the step ran)."""
    updates, overflow_at = 3, 5
    batches = micro_batches(*make_regression_data(updates * K * B, seed=0))
    rows = []
    for label, skip_on_overflow in (("always", False), ("only if the step ran", True)):
        model = make_model(seed=0)
        optimizer = sgd(model)
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, linear_warmup(4))
        scaler = torch.amp.GradScaler("cpu", init_scale=2.0**10)
        row = [label]
        for update in range(updates):
            before = flat_weights(model)
            for k, (inputs, targets) in enumerate(batches[K * update : K * update + K]):
                overflow = float("inf") if K * update + k == overflow_at else 1.0
                _amp_backward(model, inputs, targets, scaler, 1 / K, blow_up=overflow)
            scale = scaler.get_scale()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)  # a skipped step then scheduler.step(): torch warns
                scaler.step(optimizer)  # skipped if the pile holds an inf or a nan
                scaler.update()
                if not (skip_on_overflow and scaler.get_scale() < scale):
                    scheduler.step()
            optimizer.zero_grad(set_to_none=True)
            moved = "✓ stepped" if not torch.equal(before, flat_weights(model)) else "✗ skipped"
            row.append(f"{moved}, scale {scaler.get_scale():.0f}, next lr {optimizer.param_groups[0]['lr']:.3f}")
        rows.append(row)
    return Table(["scheduler.step()", *(f"update {u}" for u in range(updates))], rows)


def no_scaler_step() -> str:
    """Float formats' largest numbers, then one bfloat16 step with no scaler after a loss blown up past bfloat16's
    (and float32's) largest number: how many weights are left finite. Two lines of text."""
    window = micro_batches(*make_regression_data(2 * B, seed=0))
    model = make_model(seed=0)
    optimizer = sgd(model)
    for micro_step, (inputs, targets) in enumerate(window):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = mse(model(inputs), targets)
        if micro_step == 0:
            loss = loss * 1e39  # past the largest bfloat16 and float32 number
        (loss / len(window)).backward()
    optimizer.step()  # no GradScaler: nothing checks the pile before the step
    weights = flat_weights(model)
    largest = {t: torch.finfo(t).max for t in (torch.float16, torch.bfloat16, torch.float32)}
    return (f"largest float16 {largest[torch.float16]:.0f}, bfloat16 {largest[torch.bfloat16]:.2e}, "
            f"float32 {largest[torch.float32]:.2e}\n"
            f"one bfloat16 step, no scaler, a loss past that: {(~weights.isfinite()).sum().item()} of "
            f"{weights.numel()} weights not finite ✗")


# --- zero_grad(set_to_none=True) -------------------------------------------------------------------------------

def empty_pile_table() -> Table:
    """A step with no backward pass since zero_grad, SGD with weight decay 0.01: how far the weights moved."""
    x, y = make_regression_data(B, seed=0)
    rows = []
    for set_to_none in (False, True):
        model = make_model(seed=0)
        optimizer = sgd(model, weight_decay=0.01)
        mse(model(x), y).backward()
        optimizer.zero_grad(set_to_none=set_to_none)
        before = flat_weights(model)
        optimizer.step()  # no backward since the clear: nothing should happen
        kept = sum(p.grad.numel() for p in model.parameters() if p.grad is not None)
        rows.append([f"set_to_none={set_to_none}", f"{(flat_weights(model) - before).abs().max().item():.2e}", kept])
    return Table(["zero_grad", "weights moved by", "gradient numbers kept"], rows)
