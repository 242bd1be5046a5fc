"""How far each accumulation bug moves training, under each optimizer: a small table, as data.

For every bug in `BUGS` and every optimizer, `bug_effect_table` trains the explorer's setting
(K = 4, b = 8, 8 updates) with that one bug switched on, plus the setting the bug needs to act
(a tail of 2 micro-batches, clipping at 0.2, a warmup of 4 updates), and measures how far the
accumulated run ended from the big-batch run of the same record (same settings, no bug):

    weight_gap = |w_bug - w_big| / |w_big - w_0|

0 means the same training; 1 means as far off as the whole training moved. Under SGD a constant
factor on the gradient is a different step size; under AdamW the step divides by the gradient's
running size, so "loss not divided" and "loss divided twice" nearly vanish (only eps still sees the
scale: AdamW's weight decay is decoupled; Adam with L2 decay, `Adam(weight_decay=...)`, does not
cancel it), while zero_grad or step every micro-step and a dropped tail still bite. For the gallery notebook:

    from widgets.lessons.developer_3.bug_effects import bug_effect_table
    table = bug_effect_table()          # about 20 short runs, a few seconds on a laptop CPU
    print(table.as_text())              # one line per bug, one column per optimizer
    table.gap("loss_not_divided", "adamw")
"""
from __future__ import annotations

from dataclasses import dataclass

from widgets.core.config import BUGS, OPTIMIZER_NAMES, AccumulationConfig
from widgets.core.training import run_regimes

# The setting each bug needs before it can act (see config.BUG_NEEDS); the reference run has it too.
BUG_SETTINGS: dict[str, dict] = {
    "forget_final_step": dict(tail_micro_batches=2),
    "tail_divided_by_k": dict(tail_micro_batches=2),
    "clip_every_micro_step": dict(max_grad_norm=0.2),
    "scheduler_every_micro_step": dict(warmup_updates=4),
}
# A learning rate that trains well for 8 updates with each optimizer (AdamW steps are ~lr in size).
LEARNING_RATES: dict[str, float] = {"sgd": 0.1, "adamw": 0.01}


@dataclass(frozen=True)
class BugEffect:
    """One bug under one optimizer: how far the run ended from the bug-free big-batch run."""

    bug: str
    optimizer: str
    learning_rate: float
    weight_gap: float  # |w_bug - w_big| / |w_big - w_0|
    final_loss: float  # the buggy accumulated run's loss on all examples at the end
    reference_loss: float  # the big-batch run's


@dataclass(frozen=True)
class BugEffectTable:
    """`rows` holds one `BugEffect` per (bug, optimizer), bugs in `BUGS` order."""

    rows: tuple[BugEffect, ...]
    optimizers: tuple[str, ...]

    def gap(self, bug: str, optimizer: str) -> float:
        """The weight gap of one bug under one optimizer."""
        for row in self.rows:
            if (row.bug, row.optimizer) == (bug, optimizer):
                return row.weight_gap
        raise KeyError(f"no row for bug {bug!r} under optimizer {optimizer!r}")

    def as_text(self) -> str:
        """The table as aligned text: a row per bug, the weight gap under each optimizer."""
        header = f"{'bug':28s}" + "".join(f"{o:>12s}" for o in self.optimizers)
        lines = [header]
        for bug in dict.fromkeys(row.bug for row in self.rows):
            lines.append(f"{bug:28s}" + "".join(f"{_gap_text(self.gap(bug, o)):>12s}" for o in self.optimizers))
        return "\n".join(lines)


# Gaps below this are rounding (AdamW cancelling a constant factor, a log-only bug): their digits
# differ from one CPU's vector unit to the next, so the table prints the bound, not the digits.
ROUNDING_GAP = 1e-5


def _gap_text(gap: float) -> str:
    return f"< {ROUNDING_GAP:.0e}" if gap < ROUNDING_GAP else f"{gap:.2g}"


def bug_effect_table(optimizers: tuple[str, ...] = OPTIMIZER_NAMES, *, accumulation_steps: int = 4,
                     micro_batch_size: int = 8, num_updates: int = 8, seed: int = 0) -> BugEffectTable:
    """Train each bug under each optimizer and measure its weight gap (see the module docstring)."""
    if isinstance(optimizers, str) or not optimizers or not set(optimizers) <= set(OPTIMIZER_NAMES):
        raise ValueError(f"optimizers must be a non-empty tuple of {OPTIMIZER_NAMES}, got {optimizers!r}")
    rows = []
    for bug in BUGS:
        for optimizer in optimizers:
            config = AccumulationConfig(
                accumulation_steps=accumulation_steps, micro_batch_size=micro_batch_size, num_updates=num_updates,
                seed=seed, bugs={bug}, optimizer=optimizer, learning_rate=LEARNING_RATES[optimizer],
                **BUG_SETTINGS.get(bug, {}),
            )
            record = run_regimes(config)
            rows.append(BugEffect(bug, optimizer, config.learning_rate, record.weight_gap,
                                  record.eval_loss["accumulated"][-1], record.eval_loss["big_batch"][-1]))
    return BugEffectTable(tuple(rows), tuple(optimizers))
