"""researcher_4, memory and time: what a micro-batch costs, measured, and the memory planner."""
from widgets.controls.reveal import worked_answer
from widgets.core.accumulation import flat_grad
from widgets.core.measured import results_path
from widgets.draw.stills import still
from widgets.draw.style import new_figure
from widgets.lessons.researcher_4.controls import make_planner_widget, plan_lines
from widgets.lessons.researcher_4.draw import draw_memory_terms, draw_time_per_update
from widgets.lessons.researcher_4.exercises import memory_exercises
from widgets.lessons.researcher_4.timing import fit_micro_step_time, time_per_update
from widgets.research.anchors import anchor_block, anchor_rows, SOURCE
from widgets.research.memory import (
    chunked_lm_backward, language_model_batch, lm_loss, measure_memory_terms, tensor_bytes, TinyGPT,
)
from widgets.research.planner import (
    activation_bytes_per_layer, PlannerModel, PRESETS, transformer_memory, zero_bytes_per_rank, ZERO_STAGES,
)
from widgets.research.references import cite
from widgets.research.saved_bytes import allocator_peak
