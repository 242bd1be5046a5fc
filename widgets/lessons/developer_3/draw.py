"""The gallery's still picture of a run: the explorer's two panels, drawn once, shown with its words.

One function so the figure's look is decided in one place (`widgets.draw.style`): the pile of
update 0 on the left, the losses on the right, as the live explorer draws them.
"""
from __future__ import annotations

from widgets.core.training import RunRecord
from widgets.draw.stills import Still, still
from widgets.draw.style import new_figure
from widgets.draw.training_plots import draw_gradient_pile, draw_loss_curves


def still_picture(record: RunRecord, alt: str, width: float = 8.6, height: float = 3.0) -> Still:
    """The explorer's two panels for `record` (a `run_regimes` record), `width` x `height` inches,
    as a still picture whose text alternative is `alt` (say what it shows, with its numbers)."""
    if not isinstance(record, RunRecord):
        raise TypeError(f"record must be a RunRecord (from run_regimes), got {type(record).__name__}")
    figure = new_figure(width, height)
    pile_axes, loss_axes = figure.subplots(1, 2)
    draw_gradient_pile(record, pile_axes)
    draw_loss_curves(record, loss_axes)
    return still(figure, alt)
