"""researcher_3, noise and the critical batch: the gradient noise scale and the step/example trade-off."""
from widgets.controls.reveal import worked_answer
from widgets.core.accumulation import below
from widgets.draw.stills import still
from widgets.draw.style import new_figure
from widgets.lessons.researcher_3.controls import make_tradeoff_widget
from widgets.lessons.researcher_3.critical_batch import (
    fit_tradeoff, leave_one_out, make_teacher_problem, noise_scales_at, same_update_any_split,
    train_with_noise_scale,
)
from widgets.lessons.researcher_3.critical_race import model_at_target, race_to_target, Run, sweep_effective_batch
from widgets.lessons.researcher_3.draw import draw_best_learning_rate, draw_noise_over_training
from widgets.lessons.researcher_3.exercises import noise_exercises
from widgets.research.adam_rules import malladi_scaled
from widgets.research.noise_scale import estimate_noise_scale, linear_regression_b_simple, linear_regression_micro_grads
from widgets.research.references import cite
