"""How far each classic mistake moves training, under each optimizer: weight_gap = |w_mistake - w_big| / |w_big - w_0|.

0: the same training; 1: as far off as the whole training moved. Under AdamW a constant factor on
the gradient nearly cancels (only eps sees it), so the scale mistakes nearly vanish there.
"""
from __future__ import annotations

from dataclasses import dataclass

from widgets.core.config import OPTIMIZER_NAMES, OPTIMIZERS, AccumulationConfig
from widgets.core.mistakes import MISTAKES
from widgets.core.training import run_regimes
from widgets.core.views import Table

# A learning rate that trains well for 8 updates with each optimizer (AdamW steps are ~lr in size).
LEARNING_RATES: dict[str, float] = {"sgd": 0.1, "adamw": 0.01}



@dataclass(frozen=True)
class BugEffect:
    """One mistake under one optimizer: how far the run ended from the big-batch run without it."""

    mistake: str
    optimizer: str
    learning_rate: float
    weight_gap: float  # |w_mistake - w_big| / |w_big - w_0|
    final_loss: float  # the mistaken accumulated run's loss on all examples at the end
    reference_loss: float  # the big-batch run's


@dataclass(frozen=True)
class BugEffectTable:
    """`rows` holds one `BugEffect` per (mistake, optimizer), mistakes in registry order."""

    rows: tuple[BugEffect, ...]
    optimizers: tuple[str, ...]

    def gap(self, mistake: str, optimizer: str) -> float:
        """The weight gap of one mistake under one optimizer."""
        for row in self.rows:
            if (row.mistake, row.optimizer) == (mistake, optimizer):
                return row.weight_gap
        raise KeyError(f"no row for mistake {mistake!r} under optimizer {optimizer!r}")

    def as_table(self) -> Table:
        """A row per mistake, the weight gap under each optimizer (a gap at the rounding floor as a bound)."""
        mistakes = dict.fromkeys(row.mistake for row in self.rows)
        columns = [OPTIMIZERS[o] for o in self.optimizers]
        return Table(["mistake", *columns],
                     [[MISTAKES[m].label, *(_gap_text(self.gap(m, o)) for o in self.optimizers)] for m in mistakes],
                     right=frozenset(columns))


# Gaps below this are rounding (AdamW cancelling a constant factor, a log-only mistake): their digits
# differ from one CPU's vector unit to the next, so the table prints the bound, not the digits.
ROUNDING_GAP = 1e-5


def _gap_text(gap: float) -> str:
    return f"< {ROUNDING_GAP:.0e}" if gap < ROUNDING_GAP else f"{gap:.2g}"


def bug_effect_table(optimizers: tuple[str, ...] = OPTIMIZER_NAMES, *, accumulation_steps: int = 4,
                     micro_batch_size: int = 8, num_updates: int = 8, seed: int = 0) -> BugEffectTable:
    """Train each mistake under each optimizer and measure its weight gap (see the module docstring)."""
    if isinstance(optimizers, str) or not optimizers or not set(optimizers) <= set(OPTIMIZER_NAMES):
        raise ValueError(f"optimizers must be a non-empty tuple of {OPTIMIZER_NAMES}, got {optimizers!r}")
    rows = []
    for name, mistake in MISTAKES.items():
        for optimizer in optimizers:
            config = AccumulationConfig(
                accumulation_steps=accumulation_steps, micro_batch_size=micro_batch_size, num_updates=num_updates,
                seed=seed, mistake=name, optimizer=optimizer, learning_rate=LEARNING_RATES[optimizer],
                **mistake.setting,
            )
            record = run_regimes(config)
            rows.append(BugEffect(name, optimizer, config.learning_rate, record.weight_gap,
                                  record.eval_loss["accumulated"][-1], record.eval_loss["big_batch"][-1]))
    return BugEffectTable(tuple(rows), tuple(optimizers))
