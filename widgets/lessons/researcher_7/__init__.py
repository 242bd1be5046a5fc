"""researcher_7, shards and stages: FSDP2 with gradient sync on and off, pipeline schedules.

The drawing and the explorer load on first use: the FSDP workers import this package to reach `fsdp.py`, and
matplotlib with ipywidgets would add about 40 MB to each of them, enough to take the notebook over its memory budget."""
from widgets import on_first_use
from widgets.core.accumulation import flat_grad, GRAD_ATOL, GRAD_RTOL
from widgets.core.views import Diff, Table
from widgets.lessons.researcher_7.exercises import check_window_loop, stages_exercises
from widgets.lessons.researcher_7.fsdp import FSDPConfig, make_fsdp_mlp, MODES, process_bytes, run_fsdp
from widgets.lessons.researcher_7.pipeline import (
    bubble_formula, make_micro_batches, make_mlp, run_pipeline, simulate, split_model, unsplit_gradient,
)
from widgets.lessons.researcher_7.window import (
    WINDOW_MISTAKES, gradient_ratios, make_windows, train_pipelined, window_diff,
)
from widgets.research.ddp import make_data, rank_micro_batch
from widgets.research.planner import zero_bytes_per_rank
from widgets.research.references import cite

_ON_FIRST_USE = {
    "still": "widgets.draw.stills",
    "new_figure": "widgets.draw.style",
    "make_pipeline_explorer": "widgets.lessons.researcher_7.controls",
    **dict.fromkeys(("draw_curves", "draw_held_bytes", "draw_in_flight", "draw_timeline"),
                    "widgets.lessons.researcher_7.draw"),
}

__getattr__ = on_first_use(__name__, _ON_FIRST_USE)
