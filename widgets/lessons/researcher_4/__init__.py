"""researcher_4, memory and time: what a micro-batch costs, measured, and the memory planner.

The notebook's one import surface: every name it uses comes from here, each loaded on first use.
"""
from widgets.core.surface import lazy_surface

_NAMES = {
    "still": "widgets.draw.stills",
    "new_figure": "widgets.draw.style",
    "flat_grad": "widgets.core.accumulation",
    "make_planner_widget": "widgets.lessons.researcher_4.controls",
    "plan_lines": "widgets.lessons.researcher_4.controls",
    "draw_memory_terms": "widgets.lessons.researcher_4.draw",
    "draw_time_per_update": "widgets.lessons.researcher_4.draw",
    "memory_exercises": "widgets.lessons.researcher_4.exercises",
    "fit_micro_step_time": "widgets.lessons.researcher_4.timing",
    "time_per_update": "widgets.lessons.researcher_4.timing",
    "anchor_block": "widgets.research.anchors",
    "anchor_rows": "widgets.research.anchors",
    "SOURCE": "widgets.research.anchors",
    "chunked_lm_backward": "widgets.research.memory",
    "language_model_batch": "widgets.research.memory",
    "lm_loss": "widgets.research.memory",
    "measure_memory_terms": "widgets.research.memory",
    "tensor_bytes": "widgets.research.memory",
    "TinyGPT": "widgets.research.memory",
    "activation_bytes_per_layer": "widgets.research.planner",
    "PlannerModel": "widgets.research.planner",
    "PRESETS": "widgets.research.planner",
    "transformer_memory": "widgets.research.planner",
    "zero_bytes_per_rank": "widgets.research.planner",
    "ZERO_STAGES": "widgets.research.planner",
    "cite": "widgets.research.references",
    "allocator_peak": "widgets.research.saved_bytes",
    "results_path": "widgets.core.shared",
}
__all__ = sorted(_NAMES)
__getattr__, __dir__ = lazy_surface(__name__, _NAMES)
