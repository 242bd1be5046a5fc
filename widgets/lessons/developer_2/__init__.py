"""developer_2, the training loop line by line: the window's end, streaming, clipping, schedules, mixed precision."""
from widgets.core.accumulation import flat_grad, is_update_step, make_model, make_regression_data, micro_batch_weight
from widgets.core.config import AccumulationConfig
from widgets.core.accumulation import below
from widgets.core.loops import train
from widgets.core.mistakes import mistake_diff
from widgets.core.training import linear_warmup
from widgets.core.views import Code, Diff, Table
from widgets.draw.stills import still
from widgets.draw.style import new_figure
from widgets.lessons.developer_2.exercises import loop_exercises
from widgets.lessons.developer_2.streaming import with_last_flag
from widgets.lessons.developer_2.wall_clock import race_at_equal_time
