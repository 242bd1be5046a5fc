"""developer_3, the bug gallery: each classic mistake, its symptom, and the auditor's verdict.

The notebook's one import surface: every name it uses comes from here, each loaded on first use.
"""
from widgets.core.surface import lazy_surface

_NAMES = {
    "audit_training_loop": "widgets.audit.auditor",
    "make_prediction": "widgets.controls.prediction",
    "is_update_step": "widgets.core.accumulation",
    "make_model": "widgets.core.accumulation",
    "make_regression_data": "widgets.core.accumulation",
    "AccumulationConfig": "widgets.core.config",
    "BUGS": "widgets.core.config",
    "below": "widgets.core.floor",
    "bug_lines": "widgets.core.loop",
    "train_loop": "widgets.core.loop",
    "bug_symptoms": "widgets.core.symptoms",
    "known_torch_state": "widgets.core.torch_state",
    "example_order": "widgets.core.training",
    "mse": "widgets.core.training",
    "run_regimes": "widgets.core.training",
    "compact_png": "widgets.draw.stills",
    "draw_gradient_pile": "widgets.draw.training_plots",
    "draw_loss_curves": "widgets.draw.training_plots",
    "bug_effect_table": "widgets.lessons.developer_3.bug_effects",
    "LEARNING_RATES": "widgets.lessons.developer_3.bug_effects",
    "gallery_exercises": "widgets.lessons.developer_3.exercises",
}
__all__ = sorted(_NAMES)
__getattr__, __dir__ = lazy_surface(__name__, _NAMES)
