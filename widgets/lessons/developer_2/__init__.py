"""developer_2, the training loop line by line: the window's end, mixed precision, the short last window, streams,
logging, clipping, schedules, zero_grad and time."""
from widgets.core.accumulation import is_update_step, make_model, make_regression_data
from widgets.core.config import AccumulationConfig
from widgets.core.loops import train
from widgets.core.mistakes import mistake_diff
from widgets.core.training import linear_warmup
from widgets.core.views import Diff
from widgets.lessons.developer_2.draw import learning_rate_still
from widgets.lessons.developer_2.exercises import loop_exercises
from widgets.lessons.developer_2.measure import (
    amp_schedule_table, amp_window_table, big_batch_gap, clip_table, empty_pile_table, last_window_table,
    logging_gap, micro_batches, no_scaler_step, sgd, stream_loader, warmup_rates,
)
from widgets.lessons.developer_2.streaming import with_last_flag
from widgets.lessons.developer_2.wall_clock import race_at_equal_time, race_table
