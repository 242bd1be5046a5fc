"""researcher_1, why it is exact: the maths, token-count normalisation and precision (float16 loss scaling too)."""
from widgets.core.accumulation import compare_gradients, flat_grad, make_model, make_regression_data
from widgets.core.accumulation import below
from widgets.core.views import Diff, Table
from widgets.draw.stills import still
from widgets.draw.style import new_figure
from widgets.lessons.researcher_1.controls import make_token_spread_widget
from widgets.lessons.researcher_1.draw import draw_precision_curves, draw_spread_gap
from widgets.lessons.researcher_1.exercises import exactness_exercises
from widgets.lessons.researcher_1.fp16 import (
    float64_gradient, fp16_diff, fp16_problem, train_fp16, train_fp16_schedule_always,
)
from widgets.lessons.researcher_1.precision import make_precision_problem, MODES, precision_curves, summation_orders
from widgets.research.anchors import anchor_block, anchor_rows, SOURCE
from widgets.research.references import cite
from widgets.research.tokens import (
    big_batch_token_gradient, gap_against_spread, IGNORE_INDEX, make_token_batch, normaliser_gap, split_window,
    TinyCausalLM, token_loss_sum, token_weights, TokenGradient,
)
