"""researcher_2's plot: how far accumulated normalisation layers land from the big batch, against K."""
from __future__ import annotations

from typing import Mapping, Sequence

from matplotlib.axes import Axes
from matplotlib.lines import Line2D

from widgets.draw.style import OKABE_ITO, check_ax, legend_below

FLOOR = 1e-17  # exact zeros drawn on a log axis


def draw_norm_gaps(ax: Axes, ks: Sequence[int], gaps: Mapping[str, Sequence[float]]) -> dict[str, Line2D]:
    """max |Δ grad| (accumulated vs big batch) against K, one line per norm layer."""
    ax = check_ax(ax)
    lines = {}
    for colour, (norm, values) in zip(OKABE_ITO, gaps.items()):
        if len(values) != len(ks):
            raise ValueError(f"gaps[{norm!r}] has {len(values)} values for {len(ks)} values of K")
        (lines[norm],) = ax.plot(ks, [max(v, FLOOR) for v in values], "o-", color=colour, label=norm)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("accumulation_steps K (same 64 examples, micro_batch_size = 64 / K)")
    ax.set_ylabel("max |accumulated - big-batch grad|")
    legend_below(ax, ncols=2)
    return lines
