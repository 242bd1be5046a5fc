"""researcher_9, Adam when K changes: scaling rules, AdamW's time scale, K schedules.

The notebook's one import surface: every name it uses comes from here, each loaded on first use.
"""
from widgets.core.surface import lazy_surface

_NAMES = {
    "still": "widgets.draw.stills",
    "new_figure": "widgets.draw.style",
    "AdamHyper": "widgets.lessons.researcher_9.adam_k",
    "adamw_shrink_per_epoch": "widgets.lessons.researcher_9.adam_k",
    "adamw_tau": "widgets.lessons.researcher_9.adam_k",
    "compare_rules": "widgets.lessons.researcher_9.adam_k",
    "half_life_examples": "widgets.lessons.researcher_9.adam_k",
    "make_regression": "widgets.lessons.researcher_9.adam_k",
    "scale_adam": "widgets.lessons.researcher_9.adam_k",
    "weight_decay_for_same_tau": "widgets.lessons.researcher_9.adam_k",
    "draw_k_runs": "widgets.lessons.researcher_9.draw",
    "draw_rule_gaps": "widgets.lessons.researcher_9.draw",
    "adam_exercises": "widgets.lessons.researcher_9.exercises",
    "COUNTINGS": "widgets.lessons.researcher_9.k_schedule",
    "scheduler_after_train_loop": "widgets.lessons.researcher_9.k_schedule",
    "scheduler_positions": "widgets.lessons.researcher_9.k_schedule",
    "train_k_schedule": "widgets.lessons.researcher_9.k_schedule",
    "cite": "widgets.research.references",
}
__all__ = sorted(_NAMES)
__getattr__, __dir__ = lazy_surface(__name__, _NAMES)
