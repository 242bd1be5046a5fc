"""The gallery's still picture of a run: the explorer's two panels (the pile of update 0, the losses), drawn once."""
from __future__ import annotations

from widgets.core.training import RunRecord
from widgets.draw.stills import Still, still
from widgets.draw.style import new_figure
from widgets.lessons.beginner_2.draw import draw_gradient_pile, draw_loss_curves


def still_picture(record: RunRecord, alt: str, width: float = 8.6, height: float = 3.0) -> Still:
    """The explorer's two panels for a `run_regimes` record, `width` x `height` inches, with the text alternative `alt`."""
    figure = new_figure(width, height)
    pile_axes, loss_axes = figure.subplots(1, 2)
    draw_gradient_pile(record, pile_axes)
    draw_loss_curves(record, loss_axes)
    return still(figure, alt)
