"""researcher_6, across ranks: unequal token counts on two ranks, and the invariance oracle.

The drawing loads on first use: the gloo workers import this package to reach `across_ranks.py`, and matplotlib
would add about 30 MB to each of them, enough to take the notebook over its memory budget."""
from widgets import on_first_use
from widgets.audit.auditor import audit_training_loop
from widgets.core.accumulation import below
from widgets.exercises.verdicts import verdict
from widgets.lessons.researcher_6.across_ranks import (
    CONTEXT_LENGTH, LOOPS, RanksConfig, run_across_ranks, token_weights,
)
from widgets.lessons.researcher_6.exercises import ranks_exercises
from widgets.lessons.researcher_6.invariance import (
    BUGS, count_targets, holds, invariance_oracle, random_window, token_loss_sum, worst,
)
from widgets.research.references import cite
from widgets.research.tokens import TinyCausalLM

_ON_FIRST_USE = {
    "still": "widgets.draw.stills",
    "new_figure": "widgets.draw.style",
    "draw_imbalance_gap": "widgets.lessons.researcher_6.draw",
}

__getattr__ = on_first_use(__name__, _ON_FIRST_USE)
