"""developer_1, proving equivalence: accumulated against big-batch gradients, and where rounding enters.

The notebook's one import surface: every name it uses comes from here, each loaded on first use.
"""
from widgets.core.surface import lazy_surface

_NAMES = {
    "accumulated_gradient": "widgets.core.accumulation",
    "big_batch_gradient": "widgets.core.accumulation",
    "GRAD_ATOL": "widgets.core.accumulation",
    "GRAD_RTOL": "widgets.core.accumulation",
    "below": "widgets.core.floor",
    "division_round_trip": "widgets.lessons.developer_1.exactness",
    "exactness_survey": "widgets.lessons.developer_1.exactness",
    "FLOAT32_BINADE": "widgets.lessons.developer_1.exactness",
    "proof_exercises": "widgets.lessons.developer_1.exercises",
}
__all__ = sorted(_NAMES)
__getattr__, __dir__ = lazy_surface(__name__, _NAMES)
