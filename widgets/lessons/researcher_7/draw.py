"""Drawing for researcher notebook 7: a pipeline timeline (stages x time slots) and the FSDP bytes per rank."""
from __future__ import annotations

from widgets.draw.style import FONT_PT, OKABE_ITO, check_ax, legend_below
from widgets.lessons.researcher_7.pipeline import Timeline

KIND_COLOUR = {"F": OKABE_ITO[0], "B": OKABE_ITO[1]}


def draw_timeline(timeline: Timeline, ax, label_cells: bool = True) -> dict:
    """One row per stage, one cell per slot (forwards blue, backwards orange, blank: the bubble); the bars and labels."""
    check_ax(ax)
    drawn = {"F": [], "B": [], "labels": []}
    for kind in ("F", "B"):
        ops = [op for op in timeline.ops if op.kind == kind]
        drawn[kind] = ax.barh([op.stage for op in ops], [0.95] * len(ops), left=[op.start for op in ops],
                              height=0.8, color=KIND_COLOUR[kind], label="forward" if kind == "F" else "backward")
    if label_cells and timeline.makespan <= 80:
        for op in timeline.ops:
            drawn["labels"].append(ax.text(op.start + 0.47, op.stage, str(op.micro_batch), ha="center",
                                           va="center", fontsize=FONT_PT, color="white"))
    ax.set_xlim(0, timeline.makespan)
    ax.set_ylim(timeline.stages - 0.5, -0.6)
    ax.set_yticks(range(timeline.stages), [f"stage {s}" for s in range(timeline.stages)])
    ax.set(xlabel="time slot (one forward or one backward)",
           title=f"{timeline.schedule}: p = {timeline.stages}, m = {timeline.micro_batches}, "
                 f"bubble {timeline.bubble_fraction:.3f}")
    legend_below(ax, ncols=2)
    return drawn


def draw_in_flight(timelines: list[Timeline], ax) -> dict:
    """Per stage, the most micro-batches whose activations it holds at once, one bar group per schedule."""
    check_ax(ax)
    width = 0.8 / len(timelines)
    drawn = {}
    for k, t in enumerate(timelines):
        drawn[t.schedule] = ax.bar([s + k * width for s in range(t.stages)], t.peak_in_flight(), width,
                                   color=OKABE_ITO[2 + k], label=t.schedule)
    ax.set_xticks([s + 0.4 - width / 2 for s in range(timelines[0].stages)],
                  [f"stage {s}" for s in range(timelines[0].stages)])
    ax.set(ylabel="micro-batches held at once", title="activation memory per stage")
    legend_below(ax, ncols=2)
    return drawn


def draw_held_bytes(held: dict[str, list[int]], full_bytes: int, ax) -> dict:
    """MB one rank holds after each micro-step, one line per mode, against the full gradient's."""
    check_ax(ax)
    drawn = {}
    for k, (mode, values) in enumerate(held.items()):
        drawn[mode], = ax.plot(range(len(values)), [v / 1e6 for v in values], marker="os"[k % 2],
                               color=OKABE_ITO[k], linewidth=2, label=mode)
    drawn["full"] = ax.axhline(full_bytes / 1e6, color=OKABE_ITO[7], linestyle="--", linewidth=1,
                               label="whole gradient")
    ax.set(xlabel="micro_step", ylabel="held after the micro-step (MB)", ylim=(0, full_bytes / 1e6 * 1.2))
    ax.set_xticks(range(max(len(v) for v in held.values())))
    legend_below(ax, ncols=2)
    return drawn


def draw_curves(curves: dict[str, list[float]], ax, ylabel: str, log: bool = False) -> dict:
    """One line per run against the update, the first (the correct one) drawn thicker; a log scale if `log`.
    No legend: several panels share one (`fig.legend`)."""
    check_ax(ax)
    drawn = {}
    for k, (name, values) in enumerate(curves.items()):
        drawn[name], = ax.plot(range(1, len(values) + 1), values, color=OKABE_ITO[k], linewidth=3 if k == 0 else 1.5,
                               linestyle="-" if k == 0 else ("--", ":", "-.")[(k - 1) % 3], label=name)
    ax.set(xlabel="update", ylabel=ylabel, yscale="log" if log else "linear")
    return drawn
