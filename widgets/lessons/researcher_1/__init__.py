"""researcher_1, why it is exact: the maths, token-count normalisation and precision.

The notebook's one import surface: every name it uses comes from here, each loaded on first use.
"""
from widgets.core.surface import lazy_surface

_NAMES = {
    "still": "widgets.draw.stills",
    "new_figure": "widgets.draw.style",
    "compare_gradients": "widgets.core.accumulation",
    "flat_grad": "widgets.core.accumulation",
    "make_model": "widgets.core.accumulation",
    "make_regression_data": "widgets.core.accumulation",
    "below": "widgets.core.floor",
    "make_token_spread_widget": "widgets.lessons.researcher_1.controls",
    "draw_precision_curves": "widgets.lessons.researcher_1.draw",
    "draw_spread_gap": "widgets.lessons.researcher_1.draw",
    "exactness_exercises": "widgets.lessons.researcher_1.exercises",
    "make_precision_problem": "widgets.lessons.researcher_1.precision",
    "MODES": "widgets.lessons.researcher_1.precision",
    "precision_curves": "widgets.lessons.researcher_1.precision",
    "summation_orders": "widgets.lessons.researcher_1.precision",
    "anchor_block": "widgets.research.anchors",
    "anchor_rows": "widgets.research.anchors",
    "SOURCE": "widgets.research.anchors",
    "cite": "widgets.research.references",
    "big_batch_token_gradient": "widgets.research.tokens",
    "gap_against_spread": "widgets.research.tokens",
    "IGNORE_INDEX": "widgets.research.tokens",
    "make_token_batch": "widgets.research.tokens",
    "normaliser_gap": "widgets.research.tokens",
    "split_window": "widgets.research.tokens",
    "TinyCausalLM": "widgets.research.tokens",
    "token_loss_sum": "widgets.research.tokens",
    "token_weights": "widgets.research.tokens",
    "TokenGradient": "widgets.research.tokens",
}
__all__ = sorted(_NAMES)
__getattr__, __dir__ = lazy_surface(__name__, _NAMES)
