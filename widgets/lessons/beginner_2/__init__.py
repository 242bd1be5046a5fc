"""beginner_2, watch a model learn: the accumulation explorer, one mistake, equal examples, the trade."""
from widgets.controls.prediction import make_prediction
from widgets.core.config import AccumulationConfig
from widgets.core.training import run_regimes
from widgets.core.views import Table
from widgets.lessons.beginner_2.controls import make_accumulation_explorer
from widgets.lessons.beginner_2.equal_examples import compare_at_equal_examples
from widgets.lessons.beginner_2.exercises import explorer_predictions, SPLITS
from widgets.lessons.beginner_2.draw import loss_table, readout_lines
from widgets.lessons.beginner_2.trade import memory_share
