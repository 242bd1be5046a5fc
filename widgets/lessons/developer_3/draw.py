"""The gallery's still picture of a run: the explorer's two panels, drawn once, as a compact PNG.

One function so the figure's look is decided in one place (issue 26 restyles the figures): the pile
of update 0 on the left, the losses on the right, as the live explorer draws them.
"""
from __future__ import annotations

from matplotlib.figure import Figure

from widgets.core.training import RunRecord
from widgets.draw.stills import compact_png
from widgets.draw.training_plots import draw_gradient_pile, draw_loss_curves


def still_png(record: RunRecord, width: float = 9.0, height: float = 3.2, dpi: int = 72) -> bytes:
    """The explorer's two panels for `record` (a `run_regimes` record) as PNG bytes."""
    if not isinstance(record, RunRecord):
        raise TypeError(f"record must be a RunRecord (from run_regimes), got {type(record).__name__}")
    figure = Figure(figsize=(width, height), dpi=dpi, layout="tight")
    pile_axes, loss_axes = figure.subplots(1, 2)
    draw_gradient_pile(record, pile_axes)
    draw_loss_curves(record, loss_axes)
    return compact_png(figure)
