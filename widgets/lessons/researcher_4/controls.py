"""The (b, K) planner: a model, a memory budget and an effective batch in; (b, K) with memory and time out."""
from __future__ import annotations

import html

import ipywidgets as W

from widgets.controls.compat import Displayed, Picture, name_picture
from widgets.draw.style import DPI, TITLE_PT, FastCanvas, apply_style, errors_shown_in, new_figure, with_static_fallback
from widgets.lessons.researcher_4.draw import draw_plan
from widgets.research.planner import PRESETS, ZERO_STAGES, PlannerModel, Sharding, best_plan, paper_planner_model

GB = 1e9
TARGETS = (8, 16, 32, 64, 128, 256, 512, 1024)
WORLD_SIZES = tuple(2 ** i for i in range(11))


def sharding_text(sharding: Sharding | None) -> str:
    """The layout in words, e.g. 'ZeRO-3 / FSDP FULL_SHARD (+ weights) over 8 ranks, bf16 gradients'."""
    if sharding is None:
        return "one process, as measured"
    grads = {2: "bf16 gradients", 4: "fp32 gradients"}.get(sharding.grad_bytes, f"{sharding.grad_bytes}-byte gradients")
    ranks = "1 rank" if sharding.world_size == 1 else f"{sharding.world_size} ranks"
    text = f"{ZERO_STAGES[sharding.stage]} over {ranks}, {grads}"
    return text + (", no_sync: the whole gradient on each rank" if sharding.no_sync else "")


def plan_lines(model: PlannerModel, budget_gb: float, target: int, recompute: bool,
               sharding: Sharding | None = None) -> list[str]:
    """The planner's verdict as plain sentences (deterministic: nbval compares them)."""
    fixed = model.fixed(sharding) / GB
    where = "" if sharding is None else f" per rank ({sharding_text(sharding)})"
    lines = [f"{model.name}: weights + gradients + optimizer state = {fixed:.3g} GB{where}; budget {budget_gb:.3g} GB; "
             f"target effective batch {target}; checkpointing {'on' if recompute else 'off'}"]
    kept = model.recompute_bytes_per_example if recompute else model.activation_bytes_per_example
    terms = f"per sequence: activations kept {kept / GB:.3g} GB"
    if model.loss_bytes_per_example:
        terms += f", the loss's working set {model.loss_bytes_per_example / GB:.3g} GB"
    if model.layer_bytes_per_example:
        what = "rebuilt, then its gradients" if recompute else "its gradients in backward"
        terms += f", one layer ({what}) {model.layer_bytes_per_example / GB:.3g} GB"
    if model.embedding_gradient_bytes:
        terms += f"; once per micro-step: the tied embedding's gradient {model.embedding_gradient_bytes / GB:.3g} GB"
    lines.append(terms)
    try:
        plans = model.plans(round(budget_gb * GB), target, recompute, sharding)
    except ValueError:  # the budget is below the fixed terms: say it in words, the widget stays live
        return lines + ["the weights, gradients and optimizer state alone exceed the budget: no micro-batch fits; "
                        "shard them (ZeRO/FSDP) or raise the budget"]
    best = best_plan(plans)
    if best is None:
        lines.append("no micro-batch fits, not even b = 1: checkpoint, shard the optimizer state (ZeRO) or raise the budget")
    else:
        time = "" if best.seconds_per_update is None else f", about {best.seconds_per_update * 1e3:.3g} ms per update"
        lines.append(f"largest micro-batch that fits: b = {best.micro_batch_size}, K = {best.accumulation_steps}, "
                     f"{best.memory_bytes / GB:.3g} GB{time}")
    return lines


def zero_columns(model: PlannerModel, target: int, recompute: bool, sharding: Sharding | None) -> dict[int, list[float]]:
    """{b: memory per rank in GB under ZeRO stages 0-3} for each b dividing `target`; {} without a parameter count."""
    if sharding is None or model.parameters is None:
        return {}
    fixed = [model.fixed(Sharding(stage, sharding.world_size, sharding.grad_bytes, sharding.no_sync))
             for stage in ZERO_STAGES]
    return {b: [(f + model.working(b, recompute)) / GB for f in fixed]
            for b in range(1, target + 1) if target % b == 0}


class PlannerWidget(Displayed, W.VBox):
    """Use `make_planner_widget`."""

    def __init__(self, models: dict[str, PlannerModel], model: str, budget_gb: float, target: int, recompute: bool):
        self.models = models
        slider = dict(continuous_update=False, style={"description_width": "150px"}, layout=W.Layout(width="420px"))
        pick = dict(style=slider["style"], layout=slider["layout"])
        self.controls = {
            "model": W.Dropdown(options=list(models), value=model, description="model", **pick),
            "budget_gb": W.FloatLogSlider(value=budget_gb, base=10, min=-4, max=3, step=0.05,
                                          description="memory budget (GB)", readout_format=".3g", **slider),
            "target": W.SelectionSlider(options=TARGETS, value=target, description="target K·b", **slider),
            "recompute": W.Checkbox(value=recompute, description="activation checkpointing", indent=False),
            "stage": W.Dropdown(options=[(text, stage) for stage, text in ZERO_STAGES.items()], value=0,
                                description="ZeRO stage / FSDP", **pick),
            "world_size": W.SelectionSlider(options=WORLD_SIZES, value=1, description="ranks N", **slider),
            "grad_bytes": W.Dropdown(options=[("bf16 (2 bytes)", 2), ("fp32 accumulator (4 bytes)", 4)], value=2,
                                     description="gradients", **pick),
            "no_sync": W.Checkbox(value=False, description="FSDP no_sync (whole gradient per rank)", indent=False),
        }
        self.figure = new_figure(7.2, 3.6)  # laid out again at each redraw: the bars change
        self.ax = self.figure.subplots()
        self.canvas = FastCanvas(self.figure, [])  # every frame redrawn whole: the bars change
        self.image = Picture(format="png", layout=W.Layout(width=f"{round(7.2 * DPI)}px"))
        self.readout = W.HTML()
        self.table = W.HTML()
        self.errors = W.Output()
        self.lines: list[str] = []
        self.update()
        for c in self.controls.values():
            c.observe(self._on_change, names="value")
        c = self.controls
        super().__init__([W.HBox([W.VBox([c["model"], c["budget_gb"], c["target"], c["recompute"]]),
                                  W.VBox([c["stage"], c["world_size"], c["grad_bytes"], c["no_sync"]])]),
                          self.image, self.readout, self.table, self.errors])

    def _on_change(self, change=None) -> None:
        with errors_shown_in(self.errors, "the planner"):
            self.update()

    def sharding(self) -> Sharding | None:
        """The layout the controls describe; None for a measured model (no parameter count)."""
        c = self.controls
        if self.models[c["model"].value].parameters is None:
            return None
        return Sharding(int(c["stage"].value), int(c["world_size"].value), int(c["grad_bytes"].value),
                        bool(c["no_sync"].value))

    def update(self) -> None:
        c = self.controls
        model = self.models[c["model"].value]
        budget, target, recompute = float(c["budget_gb"].value), int(c["target"].value), bool(c["recompute"].value)
        sharding = self.sharding()
        try:
            plans = model.plans(round(budget * GB), target, recompute, sharding)
        except ValueError:  # budget below the fixed terms: nothing fits, plan_lines says why
            plans = []
        self.ax.clear()  # the bars change in number and colour; the figure itself is reused
        draw_plan([p.micro_batch_size for p in plans], [p.memory_bytes / GB for p in plans],
                  [p.fits for p in plans], budget, self.ax)
        self.ax.set_yscale("log")
        self.ax.set_title(model.name, fontsize=TITLE_PT)
        apply_style(self.figure)
        self.image.value = self.canvas.png(full=True)
        self.lines = plan_lines(model, budget, target, recompute, sharding)
        name_picture(self.image, f"Memory per micro_batch_size against the budget. {'; '.join(self.lines)}")
        self.readout.value = "<br>".join(html.escape(line) for line in self.lines)
        self.table.value = _table(plans, zero_columns(model, target, recompute, sharding), budget)

    def _repr_mimebundle_(self, **kwargs):
        return with_static_fallback(super()._repr_mimebundle_(**kwargs), self.image.value,
                                    "PlannerWidget: " + "; ".join(self.lines))


def _table(plans: list, zero: dict[int, list[float]], budget_gb: float) -> str:
    """One row per b: K, memory for the chosen layout, time, fits; then GB per rank under ZeRO 0-3."""
    head = "".join(f"<th>ZeRO-{s} GB/rank</th>" for s in ZERO_STAGES) if zero else ""
    times = {p.micro_batch_size: p for p in plans}
    rows = ""
    for b in sorted(set(times) | set(zero)):
        p = times.get(b)
        cells = ("<td>—</td>" * 4 if p is None else
                 f"<td>{p.accumulation_steps}</td><td>{p.memory_bytes / GB:.3g}</td>"
                 f"<td>{'—' if p.seconds_per_update is None else f'{p.seconds_per_update * 1e3:.3g}'}</td>"
                 f"<td>{'yes' if p.fits else 'no'}</td>")
        stages = "".join(f"<td>{gb:.3g}{'' if gb <= budget_gb else ' ✗'}</td>" for gb in zero.get(b, []))
        rows += f"<tr><td>{b}</td>{cells}{stages}</tr>"
    return ("<table><tr><th>b</th><th>K</th><th>memory (GB)</th><th>ms per update</th><th>fits</th>"
            f"{head}</tr>{rows}</table>")


def make_planner_widget(measured: PlannerModel | None = None, model: str = "7B", budget_gb: float = 80.0,
                        target: int = 64, recompute: bool = False) -> PlannerWidget:
    """Build (not display) the planner; `measured`: a model measured in the notebook; presets come with and without SDPA."""
    models = {}
    for shape in PRESETS.values():
        for sdpa in (False, True):
            paper = paper_planner_model(shape, sdpa=sdpa)
            models[paper.name] = paper
    if measured is not None:
        if not isinstance(measured, PlannerModel):
            raise TypeError(f"measured must be a PlannerModel or None, got {type(measured).__name__}")
        models = {measured.name: measured, **models}
    if model not in models:
        raise ValueError(f"model must be one of {list(models)}, got {model!r}")
    if target not in TARGETS:
        raise ValueError(f"target must be one of {TARGETS}, got {target!r}")
    if not isinstance(budget_gb, (int, float)) or not 1e-4 <= budget_gb <= 1e3:
        raise ValueError(f"budget_gb must be a number in [0.0001, 1000], got {budget_gb!r}")
    return PlannerWidget(models, model, float(budget_gb), target, bool(recompute))
