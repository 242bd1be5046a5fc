"""researcher_9, Adam when K changes: scaling rules, AdamW's time scale, K schedules."""
from widgets.draw.stills import still
from widgets.draw.style import new_figure
from widgets.lessons.researcher_9.adam_k import (
    AdamHyper, adamw_shrink_per_epoch, adamw_tau, compare_rules, half_life_examples, make_regression, scale_adam,
    weight_decay_for_same_tau,
)
from widgets.lessons.researcher_9.draw import draw_k_runs, draw_rule_gaps
from widgets.lessons.researcher_9.exercises import adam_exercises
from widgets.lessons.researcher_9.k_schedule import (
    COUNTINGS, scheduler_after_train_loop, scheduler_positions, train_k_schedule,
)
from widgets.research.references import cite
