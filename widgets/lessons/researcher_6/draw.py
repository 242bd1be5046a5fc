"""researcher_6's plot onto a given Axes: the gradient's error as the ranks' token counts part."""
from __future__ import annotations

from typing import Mapping, Sequence

from matplotlib.lines import Line2D

from widgets.draw.style import OKABE_ITO, check_ax, log_gap_axes

FLOOR = 1e-17  # an exact zero, drawn on a log axis
LABELS = {"per_rank_mean": "per-rank mean, averaged by DDP (the bug)",
          "all_reduce_count": "token sums / all-reduced count (fix 1)",
          "sum_then_scale": "sums, .grad scaled by W / N_total after the last backward (fix 2)"}


def draw_imbalance_gap(ax, imbalances: Sequence[float], rel_errors: Mapping[str, Sequence[float]]) -> dict[str, Line2D]:
    """|g - one process| / |one process| against the count imbalance, one line per loop of `rel_errors`."""
    ax = check_ax(ax)
    lines = {}
    for colour, (name, values) in zip((OKABE_ITO[5], OKABE_ITO[2], OKABE_ITO[0]), rel_errors.items()):
        style = "o-" if name == "per_rank_mean" else ("s--" if name == "all_reduce_count" else "^:")
        (lines[name],) = ax.plot(list(imbalances), [max(v, FLOOR) for v in values], style, color=colour,
                                 label=LABELS.get(name, name))
    ax.set_xscale("log", base=2)
    ax.set_xticks(list(imbalances), [f"{x:g}" for x in imbalances])
    log_gap_axes(ax, "count imbalance: rank 0's real targets / rank 1's", "|g - one process| / |one process|",
                 "the allclose tolerance (rtol)")
    return lines
