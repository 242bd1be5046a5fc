"""The explorer's two panels, each drawn onto a given `Axes` and moved in place: the gradient pile, the loss.

Every series has its own line style or marker besides its colour (the darkened Okabe-Ito palette), so
the figure survives colour-vision deficiencies and greyscale; legends sit under the Axes, off the data.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import matplotlib.axes
import matplotlib.lines
from matplotlib.ticker import MaxNLocator

from widgets.draw.style import FONT_PT, OKABE_ITO, TITLE_PT, legend_below
from widgets.core.training import REGIMES, RunRecord

REGIME_STYLE = {
    "accumulated": dict(color=OKABE_ITO[0], linestyle="-", marker="o", markersize=4, linewidth=2.2),
    "big_batch": dict(color=OKABE_ITO[1], linestyle="--", marker="s", markersize=6, linewidth=1.6, markerfacecolor="none"),
    "small_batch": dict(color=OKABE_ITO[2], linestyle=":", marker="^", markersize=4, linewidth=1.6),
}
REGIME_LABEL = {  # short, so that the three fit in one row under a panel
    "accumulated": "accumulated",
    "big_batch": "big batch",  # K·b examples at once
    "small_batch": "small batch",  # b examples per update, no accumulation
}


@dataclass
class PileArtists:
    """The lines `draw_gradient_pile` made: one pile and one target line per parameter."""

    piles: list[matplotlib.lines.Line2D]
    targets: list[matplotlib.lines.Line2D]


def _pile_steps_and_values(record: RunRecord, index: int) -> tuple[list[int], list[float]]:
    """Micro-step 0 is the empty pile (zero); micro-step k is the pile after k backward passes."""
    values = [0.0] + record.first_pile.pile[:, index].tolist()
    return list(range(len(values))), values


def draw_gradient_pile(record: RunRecord, ax: matplotlib.axes.Axes) -> PileArtists:
    """Plot `.grad` of a few parameters after each micro-step of update 1, each pile's big-batch target dashed."""
    piles, targets = [], []
    for i, (name, index) in enumerate(record.plotted_parameters.items()):
        colour = OKABE_ITO[(i + 3) % len(OKABE_ITO)]
        xs, ys = _pile_steps_and_values(record, index)
        (pile,) = ax.plot(xs, ys, color=colour, marker="os^"[i], drawstyle="steps-post", label=name)
        target = ax.axhline(float(record.first_target[index]), color=colour, linestyle="--", linewidth=1)
        piles.append(pile)
        targets.append(target)
    ax.axhline(0.0, color="0.6", linewidth=0.6)
    ax.xaxis.set_major_locator(MaxNLocator(nbins=8, integer=True))
    ax.yaxis.set_major_locator(MaxNLocator(nbins=5))
    _scale_pile_axis(record, ax)
    ax.set_xlabel("micro_step (backward passes so far)", fontsize=FONT_PT)
    ax.set_ylabel(".grad of the parameter", fontsize=FONT_PT)
    ax.set_title("Gradient pile, update 1 (dashed: big batch)", fontsize=TITLE_PT)
    ax.tick_params(labelsize=FONT_PT)
    legend_below(ax, ncols=len(piles))
    return PileArtists(piles, targets)


def update_gradient_pile(record: RunRecord, ax: matplotlib.axes.Axes, artists: PileArtists) -> PileArtists:
    """Move the lines made by `draw_gradient_pile` to a new record, in place, and rescale."""
    for pile, target, index in zip(artists.piles, artists.targets, record.plotted_parameters.values()):
        pile.set_data(*_pile_steps_and_values(record, index))
        y = float(record.first_target[index])
        target.set_ydata([y, y])
    _scale_pile_axis(record, ax)
    return artists


def _scale_pile_axis(record: RunRecord, ax: matplotlib.axes.Axes) -> None:
    """Fit the pile's axes, keeping the limits where the data fill them reasonably: unchanged limits
    let the explorer blit (`FastCanvas`). Powers of two on x: K = 5 fills 5/8, and K = 5..8 share it."""
    ax.set_xlim(-0.3, (1 << (record.config.accumulation_steps - 1).bit_length()) + 0.3)
    values = [0.0]
    for index in record.plotted_parameters.values():
        values += _pile_steps_and_values(record, index)[1] + [float(record.first_target[index])]
    values = [v for v in values if math.isfinite(v)]
    lo, hi = min(values), max(values)
    span = max(hi - lo, 1e-12)
    old_lo, old_hi = ax.get_ylim()
    if ax.get_autoscaley_on() or lo < old_lo or hi > old_hi or span < 0.3 * (old_hi - old_lo):
        ax.set_ylim(*_nice_limits(lo, hi))


def _nice_limits(lo: float, hi: float) -> tuple[float, float]:
    """Limits on a 1-2-5 grid around [lo, hi], a little room either side: many settings share them, and blit."""
    raw = max(hi - lo, 1e-12) / 4
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= raw)
    return (math.floor(lo / step) - 0.5) * step, (math.ceil(hi / step) + 0.5) * step


def _updates_and_losses(record: RunRecord, regime: str) -> tuple[list[int], list[float]]:
    """Update 0 is the starting loss; update u is the loss after u optimizer steps."""
    values = [record.initial_eval_loss] + record.eval_loss[regime]
    return list(range(len(values))), values


def draw_loss_curves(record: RunRecord, ax: matplotlib.axes.Axes) -> dict[str, matplotlib.lines.Line2D]:
    """Plot the full-data loss after each update for the three regimes; returns a line per regime."""
    lines = {}
    for regime in REGIMES:
        (lines[regime],) = ax.plot(*_updates_and_losses(record, regime), label=REGIME_LABEL[regime], **REGIME_STYLE[regime])
    ax.set_xlabel("update (optimizer steps)", fontsize=FONT_PT)
    ax.set_ylabel("loss on all examples (MSE)", fontsize=FONT_PT)
    ax.set_title("Loss per update", fontsize=TITLE_PT)
    ax.tick_params(labelsize=FONT_PT)
    legend_below(ax, ncols=len(lines))
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    _scale_loss_axis(record, ax)
    return lines


def update_loss_curves(record: RunRecord, ax: matplotlib.axes.Axes, lines: dict[str, matplotlib.lines.Line2D]) -> dict:
    """Move the lines made by `draw_loss_curves` to a new record, in place, and rescale."""
    for regime, line in lines.items():
        line.set_data(*_updates_and_losses(record, regime))
    _scale_loss_axis(record, ax)
    return lines


def _scale_loss_axis(record: RunRecord, ax: matplotlib.axes.Axes) -> None:
    """Fixed limits from 0 to 2x the starting loss: the same for every K and b, so curves can be
    compared by eye from one setting to the next (a diverging run leaves through the top)."""
    ax.set_xlim(-0.5, record.config.total_updates + 0.5)
    ax.set_ylim(0, 2 * record.initial_eval_loss)
