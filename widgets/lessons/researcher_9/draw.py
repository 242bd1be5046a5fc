"""researcher_9's plots onto a given Axes: trajectory gaps per rule, K and the loss of K-schedule runs."""
from __future__ import annotations

from widgets.draw.style import OKABE_ITO, check_ax, legend_below
from widgets.lessons.researcher_9.k_schedule import KRun


def draw_rule_gaps(gaps: dict[int, dict[str, list[float]]], ax) -> dict:
    """Per k and rule: the mean trajectory gap over seeds, each seed a dot; rule -> its bars."""
    check_ax(ax)
    rules = list(dict.fromkeys(rule for by_rule in gaps.values() for rule in by_rule))  # first-seen order
    width = 0.8 / len(rules)
    drawn = {}
    for j, rule in enumerate(rules):
        xs, heights = [], []
        for i, by_rule in enumerate(gaps.values()):
            if rule in by_rule:
                seeds = list(by_rule[rule])
                x = i + (j - (len(rules) - 1) / 2) * width
                xs.append(x)
                heights.append(sum(seeds) / len(seeds))
                ax.scatter([x] * len(seeds), seeds, s=8, color="black", zorder=3)
        drawn[rule] = ax.bar(xs, heights, width=width * 0.9, color=OKABE_ITO[j % len(OKABE_ITO)], label=rule)
    ax.set_xticks(range(len(gaps)), [f"k = {k}" for k in gaps])
    ax.set_yscale("log")
    ax.set(ylabel="gap to the batch-b trajectory\n(over the distance still to go)",
           title="batch k·b by accumulation vs batch b")
    legend_below(ax, ncols=2)
    return drawn


def draw_k_runs(runs: dict[str, KRun], ax_k, ax_loss, target: float | None = None) -> dict:
    """K, and the excess loss (log), over the examples used; label -> (K line, loss line)."""
    check_ax(ax_k, "ax_k")
    check_ax(ax_loss, "ax_loss")
    drawn = {}
    for i, (label, run) in enumerate(runs.items()):
        colour = OKABE_ITO[i % len(OKABE_ITO)]
        k_line, = ax_k.step(run.examples, run.ks, where="post", color=colour, label=label)
        loss_line, = ax_loss.plot(run.examples, run.losses, color=colour, label=label)
        drawn[label] = (k_line, loss_line)
    if target is not None:
        ax_loss.axhline(target, color="grey", linestyle=":", linewidth=1)
    ax_k.set(xlabel="examples", ylabel="K (micro-batches per update)", title="K")
    ax_loss.set_yscale("log")
    ax_loss.set(xlabel="examples", ylabel="excess loss |w − w*|²", title="loss")
    legend_below(ax_k, ncols=2)
    return drawn
