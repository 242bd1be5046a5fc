"""researcher_3, noise and the critical batch: the gradient noise scale and the step/example trade-off.

The notebook's one import surface: every name it uses comes from here, each loaded on first use.
"""
from widgets.core.surface import lazy_surface

_NAMES = {
    "still": "widgets.draw.stills",
    "new_figure": "widgets.draw.style",
    "below": "widgets.core.floor",
    "make_tradeoff_widget": "widgets.lessons.researcher_3.controls",
    "fit_tradeoff": "widgets.lessons.researcher_3.critical_batch",
    "leave_one_out": "widgets.lessons.researcher_3.critical_batch",
    "make_teacher_problem": "widgets.lessons.researcher_3.critical_batch",
    "model_at_target": "widgets.lessons.researcher_3.critical_race",
    "noise_scales_at": "widgets.lessons.researcher_3.critical_batch",
    "same_update_any_split": "widgets.lessons.researcher_3.critical_batch",
    "train_with_noise_scale": "widgets.lessons.researcher_3.critical_batch",
    "malladi_scaled": "widgets.research.adam_rules",
    "race_to_target": "widgets.lessons.researcher_3.critical_race",
    "Run": "widgets.lessons.researcher_3.critical_race",
    "sweep_effective_batch": "widgets.lessons.researcher_3.critical_race",
    "draw_best_learning_rate": "widgets.lessons.researcher_3.draw",
    "draw_noise_over_training": "widgets.lessons.researcher_3.draw",
    "noise_exercises": "widgets.lessons.researcher_3.exercises",
    "estimate_noise_scale": "widgets.research.noise_scale",
    "linear_regression_b_simple": "widgets.research.noise_scale",
    "linear_regression_micro_grads": "widgets.research.noise_scale",
    "cite": "widgets.research.references",
}
__all__ = sorted(_NAMES)
__getattr__, __dir__ = lazy_surface(__name__, _NAMES)
