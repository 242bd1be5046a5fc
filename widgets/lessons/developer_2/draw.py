"""developer_2's one figure: the learning rate each update used, the warmup stepped per update and per micro-step."""
from __future__ import annotations

import matplotlib.axes

from widgets.draw.stills import Still, still
from widgets.draw.style import new_figure
from widgets.lessons.developer_2.measure import WarmupRates

STYLES = (dict(color="#0072B2", marker="o"), dict(color="#D55E00", marker="s", linestyle="--"))


def draw_learning_rates(ax: matplotlib.axes.Axes, rates: WarmupRates) -> list:
    """Learning rate against update, a line for each way of stepping; the intended warmup's end dotted."""
    series = {"scheduler.step() per update": rates.per_update,
              "scheduler.step() per micro-step (K = 4)": rates.per_micro_step}
    lines = [ax.plot(range(len(used)), used, label=label, **style)[0]
             for (label, used), style in zip(series.items(), STYLES)]
    ax.axvline(rates.warmup_updates, color="0.5", linewidth=1, linestyle=":")
    ax.set_xlabel("update (optimizer steps)")
    ax.set_ylabel("learning rate used")
    ax.legend(loc="lower right")
    return lines


def learning_rate_still(rates: WarmupRates) -> Still:
    """The learning-rate figure as a still, its text alternative giving the update where each reaches the full rate."""
    figure = new_figure(6.4, 2.2)
    draw_learning_rates(figure.subplots(), rates)
    per_update, per_micro_step = rates.full_rate_at(rates.per_update), rates.full_rate_at(rates.per_micro_step)
    return still(figure, f"Learning rate used at each update, a warmup written for {rates.warmup_updates} updates: "
                         f"stepped once per update it reaches the full rate at update {per_update}, stepped every "
                         f"micro-step (K = 4) at update {per_micro_step}")
