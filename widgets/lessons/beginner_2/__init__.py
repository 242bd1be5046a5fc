"""beginner_2, watch a model learn: the accumulation explorer, one mistake, equal examples, the trade.

The notebook's one import surface: every name it uses comes from here, each loaded on first use.
"""
from widgets.core.surface import lazy_surface

_NAMES = {
    "make_prediction": "widgets.controls.prediction",
    "make_model": "widgets.core.accumulation",
    "make_regression_data": "widgets.core.accumulation",
    "AccumulationConfig": "widgets.core.config",
    "run_regimes": "widgets.core.training",
    "make_accumulation_explorer": "widgets.lessons.beginner_2.controls",
    "compare_at_equal_examples": "widgets.lessons.beginner_2.equal_examples",
    "explorer_predictions": "widgets.lessons.beginner_2.exercises",
    "SPLITS": "widgets.lessons.beginner_2.exercises",
    "loss_table": "widgets.lessons.beginner_2.readout",
    "readout_lines": "widgets.lessons.beginner_2.readout",
    "memory_share": "widgets.lessons.beginner_2.trade",
    "Table": "widgets.core.views",
}
__all__ = sorted(_NAMES)
__getattr__, __dir__ = lazy_surface(__name__, _NAMES)
