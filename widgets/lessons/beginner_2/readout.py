"""The explorer's readout: what a run did, in sentences read from its `RunRecord`.

`plain` (the beginner tier, the projector) says each thing as people say it, a line ending in ✓ or ✗
("gradient: 4× too big ✗"); `detailed` (the developer tier) adds the numbers a developer checks: the
`allclose` verdict at the lab's tolerance, the optimizer, the learning rates and the symptoms.
"""
from __future__ import annotations

import math
from fractions import Fraction

from widgets.core.accumulation import GRAD_ATOL, GRAD_RTOL
from widgets.core.config import OPTIMIZERS
from widgets.core.mistakes import MISTAKES
from widgets.core.symptoms import mistake_symptoms
from widgets.core.torch_state import known_torch_state
from widgets.core.training import DIVERGED_LOSS_FACTOR, RunRecord
from widgets.core.views import Table

READOUTS = ("plain", "detailed")


def readout_lines(record: RunRecord, notes: list[str] | tuple[str, ...] = (), kind: str = "plain") -> list[str]:
    """The explorer's readout as sentences, computed from `record`, then any `notes`; `kind` is "plain" or "detailed"."""
    if kind not in READOUTS:  # a notebook calls this directly
        raise ValueError(f"readout must be one of {READOUTS}, got {kind!r}")
    with known_torch_state(threads=None):  # the symptoms compute with torch: float32, grad on
        lines = _plain_lines(record) if kind == "plain" else _detailed_lines(record)
    return lines + list(notes)


def _times(factor: float) -> str:
    """A factor as people say it, two digits, as a multiple of the smaller: 4.0 -> "4×", 0.25 -> "4×"."""
    return f"{factor:.2g}×" if factor >= 1 else f"{1 / factor:.2g}×"


def _plain_lines(record: RunRecord) -> list[str]:
    c = record.config
    K, b, m = c.accumulation_steps, c.micro_batch_size, c.mistake
    lines = [f"each update: {K} micro-batches of {b} = {c.effective_batch_size} examples"]
    scale = record.grad_scale[0] if record.grad_scale else None
    if record.both_diverged:
        lines.append("gradient: no verdict, both runs blew up: lower the learning rate ✗")
    elif record.grads_allclose:
        lines.append("gradient: the same as the big batch's ✓")
    elif m is not None and MISTAKES[m].scales and scale and not math.isclose(scale, 1, rel_tol=0.01):
        lines.append(f"gradient: {_times(scale)} too {'big' if scale > 1 else 'small'} ✗")
    else:
        lines.append("gradient: not the big batch's ✗")
    if not record.learning_rates_match:
        lines.append("learning rate: not the big batch's ✗")
    steps = record.optimizer_steps
    if steps["accumulated"] != steps["big_batch"]:
        lines.append(f"updates: {steps['accumulated']} where the big batch makes {steps['big_batch']} ✗")
    if not record.log_matches and m == "log_divided_loss":
        true, logged = record.true_train_loss[0], record.train_loss["accumulated"][0]
        lines.append(f"logged loss: {_times(true / logged)} too small; the training itself is right ✗")
    lines += [f"time: {K} passes per update (the big batch: 1)",
              f"memory: {Fraction(1, K)} of the big batch" if K > 1 else "memory: the same as the big batch"]
    if m is not None:
        lines.append(f"mistake: {MISTAKES[m].label}" + (" (with one micro-batch per update it changes nothing)"
                                                        if K == 1 else ""))
    if record.diverged_at["accumulated"] is not None and not record.both_diverged:
        lines.append("the accumulated run blew up: lower the learning rate")
    return lines


def _detailed_lines(record: RunRecord) -> list[str]:
    c = record.config
    K, b = c.accumulation_steps, c.micro_batch_size
    lines = [f"effective_batch_size = K x b = {K} x {b} = {c.effective_batch_size}", _gradient_line(record)]
    if c.optimizer != "sgd":
        lines.append(f"optimizer: {OPTIMIZERS[c.optimizer]}: each step divides by the gradient's running size, "
                     "so a constant factor on every gradient nearly cancels")
    if c.warmup_updates or not record.learning_rates_match:
        lines.append(_learning_rate_line(record))
    lines += [
        f"forward/backward passes per update: accumulated {K}, big batch 1 (time grows with K)",
        f"activation memory of the accumulated run: b / (K x b) = 1/{K} of the big batch (memory grows with b)",
    ]
    if c.mistake is not None:
        lines.append(f"mistake: {MISTAKES[c.mistake].label}")
        if K == 1:
            lines.append("with K = 1 there is nothing to accumulate, so this mistake changes nothing")
        else:
            lines += mistake_symptoms(record)
    for regime, update in record.diverged_at.items():
        if update is not None:
            lines.append(
                f"the {regime.replace('_', ' ')} run diverged at update {update} (its loss was not finite or over "
                f"{DIVERGED_LOSS_FACTOR:g} x where it started): lower the learning rate"
            )
    return lines


def _gradient_line(record: RunRecord) -> str:
    """The largest gradient difference and its verdict at the lab's tolerance; no verdict once both
    runs blew up, since relative closeness of two exploding gradients says nothing about accumulation."""
    said = f"max |accumulated - big-batch gradient| = {record.max_grad_diff:.2e} -> "
    if record.both_diverged:
        first = min(record.diverged_at["accumulated"], record.diverged_at["big_batch"])
        return said + f"no verdict: both runs diverged (from update {first})"
    if record.grads_allclose:  # rounding only: its last digits differ from one CPU to the next, so none are printed
        return (f"max |accumulated - big-batch gradient|: rounding only, within the lab's tolerance (rtol {GRAD_RTOL:g}, "
                f"atol {GRAD_ATOL:g}) -> gradients allclose: True")
    return said + "gradients allclose: False"


def _learning_rate_line(record: RunRecord) -> str:
    """Whether both runs used the same learning rate at every update; the first update where not."""
    if record.learning_rates_match:
        return "learning rates match: True (the warmup gives both runs the same rate at every update)"
    rates = record.learning_rates
    u = next(u for u, (a, big) in enumerate(zip(rates["accumulated"], rates["big_batch"])) if a != big)
    return (f"learning rates match: False (update {u}: accumulated {rates['accumulated'][u]:.3g}, "
            f"big batch {rates['big_batch'][u]:.3g})")


def loss_table(record: RunRecord, updates: int | None = None, regimes: tuple[str, ...] = (
        "accumulated", "big_batch", "small_batch")) -> Table:
    """The loss on all examples after each update (the first `updates`), a column per regime, 3 decimals:
    the numbers behind the explorer's right-hand picture."""
    names = {"accumulated": "accumulated", "big_batch": "big batch", "small_batch": "small batch"}
    count = len(record.eval_loss["big_batch"]) if updates is None else updates
    rows = [[u + 1, *(f"{record.eval_loss[r][u]:.3f}" for r in regimes)] for u in range(count)]
    return Table(["after update", *(names[r] for r in regimes)], rows,
                 right=frozenset(["after update", *(names[r] for r in regimes)]))

