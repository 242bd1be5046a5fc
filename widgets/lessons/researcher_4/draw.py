"""researcher_4's plots onto a given Axes: the memory terms and time per update against b, a plan against a budget."""
from __future__ import annotations

from widgets.draw.style import OKABE_ITO, check_ax, legend_below
from widgets.research.memory import MemoryTerms

TERMS = ("parameters", "gradients", "optimizer_state", "activations")


def draw_memory_terms(rows: list[MemoryTerms], ax, scale: float = 1e6, unit: str = "MB") -> dict:
    """Stacked bars per micro-batch size: only the activation bar grows with b."""
    check_ax(ax)
    if not rows or not all(isinstance(r, MemoryTerms) for r in rows):
        raise TypeError("rows must be a non-empty list of MemoryTerms")
    labels = [str(r.micro_batch_size) for r in rows]
    bottom = [0.0] * len(rows)
    bars = {}
    hatches = ("", "//", "..", "xx")
    for i, term in enumerate(TERMS):
        values = [getattr(r, term) / scale for r in rows]
        bars[term] = ax.bar(labels, values, bottom=bottom, color=OKABE_ITO[i], hatch=hatches[i], edgecolor="white",
                            label=term.replace("_", " "))
        bottom = [b + v for b, v in zip(bottom, values)]
    ax.set(xlabel="micro_batch_size b", ylabel=f"bytes for one micro-step ({unit})")
    legend_below(ax, ncols=2)
    return bars


def draw_time_per_update(cpu: list[tuple[int, float]], gpu: dict[str, list[tuple[int, float]]], ax_cpu, ax_gpu,
                         cpu_label: str, gpu_label: str) -> dict:
    """Time per update against b: `cpu` measured here; `gpu` (per precision) on its own axes, labelled `gpu_label`."""
    check_ax(ax_cpu, "ax_cpu")
    check_ax(ax_gpu, "ax_gpu")
    line, = ax_cpu.plot(*zip(*cpu), marker="o", color=OKABE_ITO[0], linewidth=2)
    ax_cpu.set(xlabel="micro_batch_size b", ylabel="ms per update", title=cpu_label)
    ax_cpu.set_xscale("log", base=2)
    ax_cpu.set_ylim(bottom=0)
    drawn = {"cpu": line}
    for i, (name, rows) in enumerate(gpu.items()):
        drawn[name], = ax_gpu.plot(*zip(*rows), marker="s^"[i % 2], color=OKABE_ITO[i + 1], linewidth=2, label=name)
    ax_gpu.set_xscale("log", base=2)
    ax_gpu.set_yscale("log")
    ax_gpu.set(xlabel="micro_batch_size b", ylabel="ms per update", title=gpu_label)
    legend_below(ax_gpu, ncols=2)
    return drawn


def draw_plan(micro_batch_sizes: list[int], memory: list[float], fits: list[bool], budget: float, ax) -> dict:
    """Predicted memory per b (bars, hatched when over budget) and the budget line."""
    check_ax(ax)
    labels = [str(b) for b in micro_batch_sizes]
    bars = ax.bar(labels, memory, color=[OKABE_ITO[2] if f else OKABE_ITO[5] for f in fits],
                  hatch=None, edgecolor="white")
    for bar, f in zip(bars, fits):
        bar.set_hatch("" if f else "//")
    line = ax.axhline(budget, color=OKABE_ITO[7], linestyle="--", linewidth=1.5, label=f"budget {budget:.3g} GB")
    ax.set(xlabel="micro_batch_size b (K = target / b)", ylabel="predicted memory (GB)")
    legend_below(ax, ncols=2)
    return {"bars": bars, "budget": line}
