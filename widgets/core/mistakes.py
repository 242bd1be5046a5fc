"""The one registry of the classic accumulation mistakes: name, label, what it does, what it needs, its loop.

    MISTAKES["loss_not_divided"].label      # "loss not divided by K": what a control or a table says
    MISTAKES["loss_not_divided"].loop       # the correct loop with that mistake in it (widgets.core.loops)
    mistake_diff("loss_not_divided")        # its lines against the correct loop, as a unified diff

Every table that lists the mistakes derives from here: the explorer's choices and its notes, the
share codes, the gallery, its table of effects under SGD and AdamW, the symptom -> fix table, the
auditor's names for them. Torch-free at import (the share codes and the doctor read it where torch
may be broken): a mistake's loop is imported on first use.
"""
from __future__ import annotations

import difflib
import functools
import importlib
import inspect
import textwrap
from dataclasses import dataclass, field
from typing import Callable

from widgets.core.views import Table

# A setting a mistake may need before it can change anything, with the test that it is there.
NEEDS: dict[str, tuple[str, Callable[[object], bool]]] = {
    "tail_micro_batches": ("a short last window: set tail_micro_batches > 0 (which needs K >= 2)",
                           lambda value: value > 0),
    "max_grad_norm": ("gradient clipping: set max_grad_norm", lambda value: value is not None),
    # a warmup of one update is the same whichever way it is stepped: the first update always
    # uses the schedule's first value
    "warmup_updates": ("a warmup of at least 2 updates: set warmup_updates >= 2", lambda value: value >= 2),
}


@dataclass(frozen=True)
class Mistake:
    """One classic mistake. `name` is the auditor's name for it and the name of its loop in
    `widgets.core.loops`; `label` what a control or a table calls it; `does` what goes wrong;
    `symptom` what a learner sees; `fix` the fix in one line (Markdown: code in backticks); `needs` the explorer settings it needs
    to act (keys of NEEDS) and `setting` values that let it act there; `audit` the options of
    `audit_training_loop` under which the auditor sees it (a loop clipping at 1 by default);
    `scales` True when it only puts a constant factor on gradients (AdamW nearly cancels those)."""

    name: str
    label: str
    does: str
    symptom: str
    fix: str
    needs: tuple[str, ...] = ()
    setting: dict = field(default_factory=dict)
    audit: dict = field(default_factory=dict)
    scales: bool = False

    @property
    def loop(self) -> Callable:
        """The correct loop with this mistake in it: `widgets.core.loops.<name>`."""
        return getattr(importlib.import_module("widgets.core.loops"), self.name)

    def audit_call(self) -> tuple[Callable, dict]:
        """(loop, options) for `audit_training_loop(loop, K, **options)`: the loop clips at its default
        1.0 only when the audit is told `clip_norm`, else it runs with `max_norm=None`."""
        if self.audit.get("clip_norm") is not None:
            return self.loop, dict(self.audit)
        loop = functools.partial(self.loop, max_norm=None)
        loop.__name__ = self.name  # the auditor's report names the loop
        return loop, dict(self.audit)

    def waits_for(self, **settings: object) -> dict[str, str]:
        """{setting: what to set} for each setting this mistake needs that `settings` lack."""
        return {need: NEEDS[need][0] for need in self.needs if need in settings and not NEEDS[need][1](settings[need])}


MISTAKES: dict[str, Mistake] = {m.name: m for m in (
    Mistake("loss_not_divided", "loss not divided by K",
            "each micro-batch's mean loss reaches backward() undivided: K means add up to K x the update's",
            "every update K x too big: the loss jumps, a learning rate tuned here changes meaning with K",
            "multiply each micro-batch's mean loss by its share n_i / n (1/K for equal micro-batches)",
            scales=True),
    Mistake("zero_grad_every_micro_step", "zero_grad every micro-step",
            "zero_grad() runs every micro-step, so the pile keeps only the last micro-batch",
            "updates far too small and noisy: only one micro-batch counts",
            "call `zero_grad()` inside the `if`, after `optimizer.step()`"),
    Mistake("step_every_micro_step", "optimizer step every micro-step",
            "optimizer.step() runs after every backward(), on a half-built pile: K steps per update",
            "K times as many steps as updates; the run is not the big-batch run",
            "call `optimizer.step()` inside the `if` only"),
    Mistake("loss_divided_twice", "loss divided by K twice",
            "each micro-batch's loss is divided twice: 1/K^2 for K equal micro-batches",
            "every update K x too small: training crawls",
            "divide once, where the loss is weighted by its share", scales=True),
    Mistake("forget_final_step", "no step for a short last window",
            "the boundary counts full windows only, so a short last window never gets its step",
            "one update missing per epoch: the last examples never count",
            "end a window on every K-th micro-step `or` on the last one",
            needs=("tail_micro_batches",), setting={"tail_micro_batches": 2}),
    Mistake("tail_divided_by_k", "short last window divided by K",
            "each loss is divided by K, which is its share only in a full window of equal micro-batches",
            "the last update of each epoch too small (2 of 4 micro-batches: half size)",
            "weight by the share n_i / n of the window's own examples",
            needs=("tail_micro_batches",), setting={"tail_micro_batches": 2}, scales=True),
    Mistake("log_divided_loss", "log the divided loss",
            "the logged loss is divided by K once more; the gradients are right",
            "the logged loss K x too small, and it moves when K changes",
            "log the update's mean loss: each micro-batch's mean loss times its share, added up"),
    Mistake("clip_every_micro_step", "clip every micro-step",
            "clipping runs after every backward(), shrinking half-built piles and re-weighting them",
            "updates off in direction: early micro-batches count less",
            "clip once, inside the `if`, just before `optimizer.step()`",
            needs=("max_grad_norm",), setting={"max_grad_norm": 0.2}, audit={"clip_norm": 1.0}),
    Mistake("scheduler_every_micro_step", "warmup stepped every micro-step",
            "scheduler.step() runs every micro-step: a warmup of W updates is over after W / K",
            "the learning rate reaches its full value K x too soon",
            "call `scheduler.step()` inside the `if`, after `optimizer.step()`",
            needs=("warmup_updates",), setting={"warmup_updates": 4}, audit={"with_scheduler": True}),
)}


def check_mistake(name: object) -> str | None:
    """`name` if it is None (the correct loop) or a mistake of MISTAKES; else raise listing them."""
    if name is None or (isinstance(name, str) and name in MISTAKES):
        return name
    if not isinstance(name, str):
        raise TypeError(f"mistake must be None or one mistake's name (a str), got {name!r} ({type(name).__name__}); "
                        f"one of {list(MISTAKES)}")
    raise ValueError(f"mistake: unknown name {name!r}; allowed: None or one of {list(MISTAKES)}")


def _body(function: Callable) -> list[str]:
    """The lines of `function` after its signature and docstring."""
    lines = textwrap.dedent(inspect.getsource(function)).splitlines()
    start = next(i for i, line in enumerate(lines) if line.lstrip().startswith('"""'))
    return lines[start + 1:]


def mistake_diff(name: str, context: int = 3) -> str:
    """The body of loop `name` (a mistake, or a variant of `widgets.core.loops.VARIANTS`) against the
    correct loop's, as a unified diff ('-' the correct line, '+' its own): the lines that differ, with
    `context` lines around them."""
    loops = importlib.import_module("widgets.core.loops")
    if name not in loops.VARIANTS:
        check_mistake(name)
        if name is None:
            raise ValueError("mistake_diff needs a mistake's name, not None")
    loop = getattr(loops, name)
    diff = difflib.unified_diff(_body(loops.train), _body(loop), "train", name, n=context, lineterm="")
    return "\n".join(line for line in diff if not line.startswith(("---", "+++", "@@")))


GALLERY = "developer_3_bug_gallery.ipynb"  # each mistake's exhibit sits under an anchor named after it
RULE = ("One rule ties them together: everything that belongs to an update (the loss's scale, the step, "
        "zero_grad, clipping, the schedule, the log) happens once per window, at the window's last micro-step.")


def mistakes_table(gallery: str | None = GALLERY) -> Table:
    """The classic mistakes, one line each: the mistake (a link to its exhibit in `gallery`; "": in
    this notebook; None: no links), what you see, the fix; the rule that ties them together underneath."""
    def name(m: Mistake) -> str:
        return m.label if gallery is None else f"[{m.label}]({gallery}#{m.name})"
    return Table(["mistake", "what you see", "the fix"], [[name(m), m.symptom, m.fix] for m in MISTAKES.values()],
                 note=RULE)
