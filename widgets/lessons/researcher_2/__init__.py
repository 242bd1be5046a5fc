"""researcher_2, where it breaks: batch norm, dropout, contrastive losses, once-per-update work.

The notebook's one import surface: every name it uses comes from here, each loaded on first use.
"""
from widgets.core.surface import lazy_surface

_NAMES = {
    "still": "widgets.draw.stills",
    "new_figure": "widgets.draw.style",
    "flat_grad": "widgets.core.accumulation",
    "make_model": "widgets.core.accumulation",
    "make_regression_data": "widgets.core.accumulation",
    "check_int": "widgets.core.config",
    "below": "widgets.core.floor",
    "loss_not_divided": "widgets.core.loops",
    "train": "widgets.core.loops",
    "accumulated_norm_gradient": "widgets.lessons.researcher_2.batchnorm",
    "big_batch_norm_gradient": "widgets.lessons.researcher_2.batchnorm",
    "compare_norm": "widgets.lessons.researcher_2.batchnorm",
    "make_norm_data": "widgets.lessons.researcher_2.batchnorm",
    "make_norm_model": "widgets.lessons.researcher_2.batchnorm",
    "running_stats_after_one_update": "widgets.lessons.researcher_2.batchnorm",
    "full_batch_contrastive": "widgets.lessons.researcher_2.contrastive",
    "gradient_cache_contrastive": "widgets.lessons.researcher_2.contrastive",
    "info_nce": "widgets.lessons.researcher_2.contrastive",
    "make_encoders": "widgets.lessons.researcher_2.contrastive",
    "make_pairs": "widgets.lessons.researcher_2.contrastive",
    "naive_accumulated_contrastive": "widgets.lessons.researcher_2.contrastive",
    "draw_norm_gaps": "widgets.lessons.researcher_2.draw",
    "dropout_gradients": "widgets.lessons.researcher_2.dropout",
    "DropoutMLP": "widgets.lessons.researcher_2.dropout",
    "mean_gap_over_draws": "widgets.lessons.researcher_2.dropout",
    "breaks_exercises": "widgets.lessons.researcher_2.exercises",
    "run_once_per_update": "widgets.lessons.researcher_2.once_per_update",
    "same_run": "widgets.lessons.researcher_2.once_per_update",
    "cite": "widgets.research.references",
}
__all__ = sorted(_NAMES)
__getattr__, __dir__ = lazy_surface(__name__, _NAMES)
