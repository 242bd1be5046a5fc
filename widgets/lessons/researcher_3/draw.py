"""researcher_3's plots onto a given Axes: B_simple over training, the trade-off, the best learning rate against B."""
from __future__ import annotations

import math
import statistics

from widgets.draw.style import FONT_PT, OKABE_ITO, check_ax, legend_below
from widgets.lessons.researcher_3.critical_batch import NoiseRecord, Tradeoff


def draw_noise_over_training(record: NoiseRecord, ax_loss, ax_noise) -> dict:
    """Left: the full-data loss per update. Right: B_simple of each window (dots) and its EMA (line)."""
    if not isinstance(record, NoiseRecord):
        raise TypeError(f"record must be a NoiseRecord, got {type(record).__name__}")
    check_ax(ax_loss, "ax_loss")
    check_ax(ax_noise, "ax_noise")
    updates = range(len(record.losses))
    loss, = ax_loss.plot(updates, record.losses, color=OKABE_ITO[0], linewidth=2)
    ax_loss.set(xlabel="update", ylabel="loss (cross-entropy, all data)", title="the loss falls")
    finite = [(u, v) for u, v in zip(updates, record.per_window) if math.isfinite(v) and v > 0]
    dots = ax_noise.scatter([u for u, _ in finite], [v for _, v in finite], s=6, color=OKABE_ITO[4], alpha=0.5,
                            label="one window (K micro-batches)")
    smooth_pts = [(u, v) for u, v in zip(updates, record.smoothed) if math.isfinite(v) and v > 0]
    smooth, = ax_noise.plot([u for u, _ in smooth_pts], [v for _, v in smooth_pts], color=OKABE_ITO[5],
                            linewidth=2.2, label="EMA of |G|² and tr(Σ), then the ratio")
    ax_noise.set_yscale("log")
    ax_noise.set(xlabel="update", ylabel="B_simple (examples)", title="and the noise scale grows")
    legend_below(ax_noise, ncols=2)
    return {"loss": loss, "dots": dots, "smoothed": smooth}


def draw_tradeoff(points: list[tuple[int, float]], fit: Tradeoff, ax) -> dict:
    """Measured (E, S) per effective batch, the fitted hyperbola and its asymptotes; `marker` is free to move."""
    batches = [B for B, _ in points]
    lo, hi = min(batches) / 2, max(batches) * 4
    grid = [lo * (hi / lo) ** (i / 99) for i in range(100)]
    curve, = ax.plot([fit.examples(B) for B in grid], [fit.steps(B) for B in grid], color=OKABE_ITO[0],
                     linewidth=2, label="fit: (S/S_min − 1)(E/E_min − 1) = 1")
    measured = ax.scatter([B * S for B, S in points], [S for _, S in points], color=OKABE_ITO[1], zorder=3,
                          marker="s", label="measured (best learning rate)")
    for B, S in points:
        ax.annotate(f"B={B}", (B * S, S), textcoords="offset points", xytext=(4, 4), fontsize=FONT_PT)
    ax.axhline(fit.s_min, color="grey", linestyle=":", linewidth=1)
    ax.axvline(fit.e_min, color="grey", linestyle=":", linewidth=1)
    crit = fit.b_crit
    ax.scatter([fit.examples(crit)], [fit.steps(crit)], color=OKABE_ITO[5], marker="*", s=140, zorder=4,
               label=f"B_crit = E_min/S_min = {crit:.0f}")
    marker, = ax.plot([fit.examples(crit)], [fit.steps(crit)], "o", markersize=12, markerfacecolor="none",
                      markeredgecolor=OKABE_ITO[7], markeredgewidth=2)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set(xlabel="examples to reach the target, E", ylabel="steps (updates) to reach it, S")
    legend_below(ax, ncols=2)
    return {"curve": curve, "measured": measured, "marker": marker}


def draw_best_learning_rate(best: dict[int, list[float]], ax, diverging: dict[int, list[float]] | None = None) -> dict:
    """Each replicate's best learning rate against B, their median, linear scaling and the stability limit (log-log)."""
    check_ax(ax)
    batches = sorted(best)
    if not batches or not all(best[B] for B in batches):
        raise ValueError("best must map each effective batch to a non-empty list of learning rates")
    dots = ax.scatter([B for B in batches for _ in best[B]], [lr for B in batches for lr in best[B]], s=14,
                      color=OKABE_ITO[0], alpha=0.35, label="best learning rate, one replicate")
    median, = ax.plot(batches, [statistics.median(best[B]) for B in batches], marker="o", color=OKABE_ITO[0],
                      linewidth=2, label="their median")
    lr0, B0 = statistics.median(best[batches[0]]), batches[0]
    rule, = ax.plot(batches, [lr0 * B / B0 for B in batches], linestyle="--", color=OKABE_ITO[5], linewidth=1.5,
                    label=f"linear scaling from B = {B0}")
    drawn = {"dots": dots, "median": median, "rule": rule}
    if diverging:
        pts = [(B, statistics.median(diverging[B])) for B in batches if diverging.get(B)]
        drawn["limit"], = ax.plot(*zip(*pts), linestyle=":", color=OKABE_ITO[6], linewidth=2,
                                  label="smallest learning rate that diverged (median)")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    ax.set(xlabel="effective batch K·b", ylabel="learning rate (SGD)")
    legend_below(ax, ncols=2)
    return drawn
