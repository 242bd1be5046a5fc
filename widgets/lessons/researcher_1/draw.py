"""researcher_1's plots onto a given Axes; the H200 reference is dashed and labelled "measured on an NVIDIA H200"."""
from __future__ import annotations

from typing import Mapping, Sequence

from matplotlib.axes import Axes
from matplotlib.lines import Line2D

from widgets.draw.style import FONT_PT, OKABE_ITO, check_ax, log_gap_axes

NORMALISER_LABELS = {"per_micro_batch": "token mean per micro-batch, / K (the bug)",
                     "window": "token sum / real tokens of the window (the fix)"}
H200_LABEL = "measured on an NVIDIA H200"
FLOOR = 1e-17  # exact zeros drawn on a log axis


def draw_spread_gap(ax: Axes, gaps: Mapping[str, Sequence[float]]) -> dict[str, Line2D]:
    """Relative gradient gap against the length spread, one line per normaliser (from `gap_against_spread`)."""
    ax = check_ax(ax)
    if "spread" not in gaps:
        raise ValueError("gaps must hold a 'spread' list and one list per normaliser (from gap_against_spread)")
    lines = {}
    for colour, name in zip((OKABE_ITO[5], OKABE_ITO[2]), NORMALISER_LABELS):
        values = [max(v, FLOOR) for v in gaps[name]]
        (lines[name],) = ax.plot(gaps["spread"], values, "o-", color=colour, label=NORMALISER_LABELS[name])
    log_gap_axes(ax, "length_spread (0: all sequences full length)", "max |Δ grad| / max |big-batch grad|",
                 "float32 rounding, for scale")
    return lines


def draw_precision_curves(ax: Axes, ks: Sequence[int], curves: Mapping[str, Sequence[float]],
                          anchors: Sequence[Mapping] = ()) -> dict[str, Line2D]:
    """Relative error against K per precision mode (solid, this CPU), and the H200 rows (dashed)."""
    ax = check_ax(ax)
    colours = dict(zip(["float64", "float32", "bf16_autocast", "bf16_params", "bf16_params_fp32_master",
                        "fp16_autocast_scaled"], OKABE_ITO))
    colours["fp32"] = colours["float32"]  # the H200 file's name for the same mode
    lines = {}
    for mode, values in curves.items():
        if len(values) != len(ks):
            raise ValueError(f"curves[{mode!r}] has {len(values)} values for {len(ks)} values of K")
        (lines[mode],) = ax.plot(ks, [max(v, FLOOR) for v in values], "o-", color=colours.get(mode, "k"),
                                 label=f"{mode} (this CPU)")
    modes = sorted({row["mode"] for row in anchors})
    for mode in modes:
        rows = sorted((r for r in anchors if r["mode"] == mode), key=lambda r: r["K"])
        (lines[f"h200:{mode}"],) = ax.plot([r["K"] for r in rows], [r["max_rel_err"] for r in rows], "s--",
                                           color=colours.get(mode, "k"), alpha=0.6, ms=4,
                                           label=f"{mode} ({H200_LABEL})")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("accumulation_steps K")
    ax.set_ylabel("max |error| / max |float64 big-batch grad|")
    ax.legend(fontsize=FONT_PT, ncol=2, loc="upper left", bbox_to_anchor=(0, -0.18))
    return lines
