"""developer_2, the training loop: the update boundary, streaming, clipping, schedulers and logging.

The notebook's one import surface: every name it uses comes from here, each loaded on first use.
"""
from widgets.core.surface import lazy_surface

_NAMES = {
    "flat_grad": "widgets.core.accumulation",
    "is_update_step": "widgets.core.accumulation",
    "make_model": "widgets.core.accumulation",
    "make_regression_data": "widgets.core.accumulation",
    "micro_batch_weight": "widgets.core.accumulation",
    "check_bugs": "widgets.core.config",
    "below": "widgets.core.floor",
    "count_examples": "widgets.core.loop",
    "linear_warmup": "widgets.core.training",
    "loop_exercises": "widgets.lessons.developer_2.exercises",
    "with_last_flag": "widgets.lessons.developer_2.streaming",
}
__all__ = sorted(_NAMES)
__getattr__, __dir__ = lazy_surface(__name__, _NAMES)
