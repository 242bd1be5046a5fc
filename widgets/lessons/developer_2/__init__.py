"""developer_2, the training loop line by line: the window's end, streaming, logging, clipping, schedules,
mixed precision (the GradScaler variant as a diff of `train`), and the equal-time race.

The notebook's one import surface: every name it uses comes from here, each loaded on first use.
"""
from widgets.core.surface import lazy_surface

_NAMES = {
    "still": "widgets.draw.stills",
    "new_figure": "widgets.draw.style",
    "flat_grad": "widgets.core.accumulation",
    "is_update_step": "widgets.core.accumulation",
    "make_model": "widgets.core.accumulation",
    "make_regression_data": "widgets.core.accumulation",
    "micro_batch_weight": "widgets.core.accumulation",
    "AccumulationConfig": "widgets.core.config",
    "below": "widgets.core.floor",
    "train": "widgets.core.loops",
    "mistake_diff": "widgets.core.mistakes",
    "linear_warmup": "widgets.core.training",
    "Code": "widgets.core.views",
    "Diff": "widgets.core.views",
    "Table": "widgets.core.views",
    "loop_exercises": "widgets.lessons.developer_2.exercises",
    "with_last_flag": "widgets.lessons.developer_2.streaming",
    "race_at_equal_time": "widgets.lessons.developer_2.wall_clock",
}
__all__ = sorted(_NAMES)
__getattr__, __dir__ = lazy_surface(__name__, _NAMES)
