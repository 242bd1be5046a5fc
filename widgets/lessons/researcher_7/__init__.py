"""researcher_7, shards and stages: FSDP2 with gradient sync on and off, pipeline schedules.

The notebook's one import surface: every name it uses comes from here, each loaded on first use.
"""
from widgets.core.surface import lazy_surface

_NAMES = {
    "still": "widgets.draw.stills",
    "new_figure": "widgets.draw.style",
    "flat_grad": "widgets.core.accumulation",
    "GRAD_ATOL": "widgets.core.accumulation",
    "GRAD_RTOL": "widgets.core.accumulation",
    "make_pipeline_explorer": "widgets.lessons.researcher_7.controls",
    "draw_held_bytes": "widgets.lessons.researcher_7.draw",
    "draw_in_flight": "widgets.lessons.researcher_7.draw",
    "draw_timeline": "widgets.lessons.researcher_7.draw",
    "stages_exercises": "widgets.lessons.researcher_7.exercises",
    "make_fsdp_mlp": "widgets.lessons.researcher_7.fsdp",
    "FSDPConfig": "widgets.lessons.researcher_7.fsdp",
    "MODES": "widgets.lessons.researcher_7.fsdp",
    "process_bytes": "widgets.lessons.researcher_7.fsdp",
    "run_fsdp": "widgets.lessons.researcher_7.fsdp",
    "bubble_formula": "widgets.lessons.researcher_7.pipeline",
    "make_micro_batches": "widgets.lessons.researcher_7.pipeline",
    "make_mlp": "widgets.lessons.researcher_7.pipeline",
    "run_pipeline": "widgets.lessons.researcher_7.pipeline",
    "simulate": "widgets.lessons.researcher_7.pipeline",
    "split_model": "widgets.lessons.researcher_7.pipeline",
    "unsplit_gradient": "widgets.lessons.researcher_7.pipeline",
    "make_data": "widgets.research.ddp",
    "rank_micro_batch": "widgets.research.ddp",
    "zero_bytes_per_rank": "widgets.research.planner",
    "cite": "widgets.research.references",
}
__all__ = sorted(_NAMES)
__getattr__, __dir__ = lazy_surface(__name__, _NAMES)
