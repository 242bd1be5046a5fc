"""researcher_8's plots onto a given Axes: token weights per loss type, expert loads per domain."""
from __future__ import annotations

from typing import Mapping, Sequence

from matplotlib.axes import Axes

from widgets.draw.style import OKABE_ITO, check_ax, legend_below


def draw_token_weights(ax: Axes, lengths: Sequence[int], weights: Mapping[str, Sequence[float]]) -> dict:
    """Bars per completion, one per loss type: its tokens' weight relative to the window's token mean."""
    ax = check_ax(ax)
    total = sum(lengths)
    width = 0.8 / len(weights)
    bars = {}
    for i, (name, values) in enumerate(weights.items()):
        xs = [j + (i - (len(weights) - 1) / 2) * width for j in range(len(lengths))]
        bars[name] = ax.bar(xs, [w * total for w in values], width, color=OKABE_ITO[i % len(OKABE_ITO)], label=name)
    ax.axhline(1.0, color="grey", lw=0.8, ls=":")
    ax.set_xticks(range(len(lengths)), [str(n) for n in lengths])
    ax.set(xlabel="completion length (tokens)", ylabel="weight x window tokens")
    legend_below(ax, ncols=2)
    return bars


def draw_expert_load(ax: Axes, load: Sequence[Sequence[float]], title: str = "") -> list:
    """Stacked bars per expert: how much of its load comes from each domain."""
    ax = check_ax(ax)
    num_experts = len(load[0])
    bottom = [0.0] * num_experts
    drawn = []
    for d, row in enumerate(load):
        share = [v / len(load) for v in row]  # the fraction of all tokens: domain d's tokens at expert e
        drawn.append(ax.bar(range(num_experts), share, bottom=bottom, color=OKABE_ITO[d % len(OKABE_ITO)],
                            label=f"domain {d}"))
        bottom = [b + s for b, s in zip(bottom, share)]
    ax.axhline(1 / num_experts, color="grey", lw=0.8, ls=":")
    ax.set_xticks(range(num_experts), [f"expert {e}" for e in range(num_experts)])
    ax.set(ylabel="fraction of all tokens", ylim=(0, max(0.5, 1.15 * max(bottom))), title=title)
    legend_below(ax, ncols=2)
    return drawn
