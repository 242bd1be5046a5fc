"""researcher_6, across ranks: unequal token counts on two ranks, and the invariance oracle."""
from widgets.audit.auditor import audit_training_loop
from widgets.core.accumulation import below
from widgets.draw.stills import still
from widgets.draw.style import new_figure
from widgets.lessons.researcher_6.across_ranks import (
    CONTEXT_LENGTH, LOOPS, RanksConfig, run_across_ranks, token_weights,
)
from widgets.lessons.researcher_6.draw import draw_imbalance_gap
from widgets.lessons.researcher_6.exercises import ranks_exercises
from widgets.lessons.researcher_6.invariance import (
    BUGS, count_targets, holds, invariance_oracle, random_window, token_loss_sum, worst,
)
from widgets.research.references import cite
from widgets.research.tokens import TinyCausalLM
