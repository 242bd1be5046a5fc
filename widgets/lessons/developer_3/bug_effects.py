"""How far each classic mistake moves training, under each optimizer: weight_gap = |w_mistake - w_big| / |w_big - w_0|.

0: the same training; 1: as far off as the whole training moved. Under AdamW a constant factor on
the gradient nearly cancels (only eps sees it), so the scale mistakes nearly vanish there.
"""
from __future__ import annotations

from dataclasses import dataclass

from widgets.core.config import OPTIMIZERS, AccumulationConfig
from widgets.core.mistakes import MISTAKES
from widgets.core.training import run_regimes
from widgets.core.views import Table

# A learning rate that trains well for 8 updates with each optimizer (AdamW steps are ~lr in size).
LEARNING_RATES: dict[str, float] = {"sgd": 0.1, "adamw": 0.01}

# Gaps below this are rounding (AdamW cancelling a constant factor, a log-only mistake): their digits
# differ from one CPU's vector unit to the next, so the table prints the bound, not the digits.
ROUNDING_GAP = 1e-5


def _gap_text(gap: float) -> str:
    return f"< {ROUNDING_GAP:.0e}" if gap < ROUNDING_GAP else f"{gap:.2g}"


@dataclass(frozen=True)
class BugEffectTable:
    """The weight gap of each (mistake, optimizer)."""

    gaps: dict[tuple[str, str], float]

    def gap(self, mistake: str, optimizer: str) -> float:
        """The weight gap of one mistake under one optimizer."""
        return self.gaps[mistake, optimizer]

    def as_table(self) -> Table:
        """A row per mistake in registry order, the weight gap under each optimizer (a gap at the rounding floor as a bound)."""
        columns = list(OPTIMIZERS.values())
        return Table(["mistake", *columns],
                     [[m.label, *(_gap_text(self.gap(name, o)) for o in OPTIMIZERS)] for name, m in MISTAKES.items()],
                     right=frozenset(columns))


def bug_effect_table() -> BugEffectTable:
    """Train each mistake under each optimizer (the default config: K = 4, b = 8, 8 updates) and measure its weight gap."""
    gaps = {}
    for name, mistake in MISTAKES.items():
        for optimizer in OPTIMIZERS:
            config = AccumulationConfig(mistake=name, optimizer=optimizer, learning_rate=LEARNING_RATES[optimizer],
                                        **mistake.setting)
            gaps[name, optimizer] = run_regimes(config).weight_gap
    return BugEffectTable(gaps)
