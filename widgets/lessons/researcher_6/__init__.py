"""researcher_6, across ranks: unequal token counts on two ranks, and the invariance oracle.

The notebook's one import surface: every name it uses comes from here, each loaded on first use.
"""
from widgets.core.surface import lazy_surface

_NAMES = {
    "still": "widgets.draw.stills",
    "new_figure": "widgets.draw.style",
    "audit_training_loop": "widgets.audit.auditor",
    "below": "widgets.core.floor",
    "LOOPS": "widgets.lessons.researcher_6.across_ranks",
    "RanksConfig": "widgets.lessons.researcher_6.across_ranks",
    "run_across_ranks": "widgets.lessons.researcher_6.across_ranks",
    "token_weights": "widgets.lessons.researcher_6.across_ranks",
    "draw_imbalance_gap": "widgets.lessons.researcher_6.draw",
    "ranks_exercises": "widgets.lessons.researcher_6.exercises",
    "BUGS": "widgets.lessons.researcher_6.invariance",
    "count_targets": "widgets.lessons.researcher_6.invariance",
    "holds": "widgets.lessons.researcher_6.invariance",
    "invariance_oracle": "widgets.lessons.researcher_6.invariance",
    "random_window": "widgets.lessons.researcher_6.invariance",
    "token_loss_sum": "widgets.lessons.researcher_6.invariance",
    "worst": "widgets.lessons.researcher_6.invariance",
    "cite": "widgets.research.references",
    "TinyCausalLM": "widgets.research.tokens",
}
__all__ = sorted(_NAMES)
__getattr__, __dir__ = lazy_surface(__name__, _NAMES)
