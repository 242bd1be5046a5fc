"""beginner_2, watch a model learn: the accumulation explorer, equal examples, equal time.

The notebook's one import surface: every name it uses comes from here, each loaded on first use.
"""
from widgets.core.surface import lazy_surface

_NAMES = {
    "make_prediction": "widgets.controls.prediction",
    "make_model": "widgets.core.accumulation",
    "make_regression_data": "widgets.core.accumulation",
    "AccumulationConfig": "widgets.core.config",
    "run_regimes": "widgets.core.training",
    "readout_lines": "widgets.lessons.beginner_2.controls",
    "compare_at_equal_examples": "widgets.lessons.beginner_2.equal_examples",
    "race_at_equal_time": "widgets.lessons.beginner_2.wall_clock",
    "anchor_block": "widgets.research.anchors",
    "anchor_rows": "widgets.research.anchors",
    "SOURCE": "widgets.research.anchors",
    "SavedTensorCounter": "widgets.research.saved_bytes",
}
__all__ = sorted(_NAMES)
__getattr__, __dir__ = lazy_surface(__name__, _NAMES)
