"""researcher_2, where it breaks: batch norm, dropout, contrastive losses, once-per-update work."""
from widgets.core.accumulation import flat_grad, make_model, make_regression_data
from widgets.core.config import check_int
from widgets.core.accumulation import below
from widgets.core.loops import loss_not_divided, train
from widgets.draw.stills import still
from widgets.draw.style import new_figure
from widgets.lessons.researcher_2.batchnorm import (
    accumulated_norm_gradient, big_batch_norm_gradient, compare_norm, make_norm_data, make_norm_model,
    running_stats_after_one_update,
)
from widgets.lessons.researcher_2.contrastive import (
    full_batch_contrastive, gradient_cache_contrastive, info_nce, make_encoders, make_pairs,
    naive_accumulated_contrastive,
)
from widgets.lessons.researcher_2.draw import draw_norm_gaps
from widgets.lessons.researcher_2.dropout import dropout_gradients, DropoutMLP, mean_gap_over_draws
from widgets.lessons.researcher_2.exercises import breaks_exercises
from widgets.lessons.researcher_2.once_per_update import run_once_per_update, same_run
from widgets.research.references import cite
