"""developer_3, the mistake gallery: each classic mistake as a diff of the correct loop, its symptom,
the auditor's verdict; which ones AdamW hides; your own loop, checked.

The notebook's one import surface: every name it uses comes from here, each loaded on first use.
"""
from widgets.core.surface import lazy_surface

_NAMES = {
    "audit_training_loop": "widgets.audit.auditor",
    "make_prediction": "widgets.controls.prediction",
    "make_model": "widgets.core.accumulation",
    "make_regression_data": "widgets.core.accumulation",
    "AccumulationConfig": "widgets.core.config",
    "below": "widgets.core.floor",
    "train": "widgets.core.loops",
    "MISTAKES": "widgets.core.mistakes",
    "mistake_diff": "widgets.core.mistakes",
    "mistakes_table": "widgets.core.mistakes",
    "mistake_symptoms": "widgets.core.symptoms",
    "known_torch_state": "widgets.core.torch_state",
    "example_order": "widgets.core.training",
    "mse": "widgets.core.training",
    "run_regimes": "widgets.core.training",
    "Code": "widgets.core.views",
    "Diff": "widgets.core.views",
    "Table": "widgets.core.views",
    "verdict": "widgets.exercises.verdicts",
    "make_accumulation_explorer": "widgets.lessons.beginner_2.controls",
    "bug_effect_table": "widgets.lessons.developer_3.bug_effects",
    "LEARNING_RATES": "widgets.lessons.developer_3.bug_effects",
    "still_picture": "widgets.lessons.developer_3.draw",
    "gallery_exercises": "widgets.lessons.developer_3.exercises",
}
__all__ = sorted(_NAMES)
__getattr__, __dir__ = lazy_surface(__name__, _NAMES)
