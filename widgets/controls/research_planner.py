"""The (b, K) planner: a model, a memory budget and a target effective batch in; feasible (b, K)
pairs with predicted memory and time per update out, checkpointing as an option."""
from __future__ import annotations

import html

import ipywidgets as W
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from widgets.draw.frames import errors_shown_in, with_static_fallback
from widgets.draw.research_cost import draw_plan
from widgets.research.planner import PRESETS, PlannerModel, Plan, best_plan, paper_planner_model

GB = 1e9
TARGETS = (8, 16, 32, 64, 128, 256, 512, 1024)


def plan_lines(model: PlannerModel, budget_gb: float, target: int, recompute: bool) -> list[str]:
    """The planner's verdict as plain sentences (deterministic: nbval compares them)."""
    fixed = model.fixed_bytes / GB
    lines = [f"{model.name}: weights + gradients + optimizer state = {fixed:.3g} GB; budget {budget_gb:.3g} GB; "
             f"target effective batch {target}; checkpointing {'on' if recompute else 'off'}"]
    try:
        plans = model.plans(round(budget_gb * GB), target, recompute)
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


class PlannerWidget(W.VBox):
    """Use `make_planner_widget`."""

    def __init__(self, models: dict[str, PlannerModel], model: str, budget_gb: float, target: int, recompute: bool):
        self.models = models
        slider = dict(continuous_update=False, style={"description_width": "150px"}, layout=W.Layout(width="420px"))
        self.controls = {
            "model": W.Dropdown(options=list(models), value=model, description="model",
                                style=slider["style"], layout=slider["layout"]),
            "budget_gb": W.FloatLogSlider(value=budget_gb, base=10, min=-4, max=3, step=0.05,
                                          description="memory budget (GB)", readout_format=".3g", **slider),
            "target": W.SelectionSlider(options=TARGETS, value=target, description="target K·b", **slider),
            "recompute": W.Checkbox(value=recompute, description="activation checkpointing", indent=False),
        }
        self.figure = Figure(figsize=(7, 3), dpi=72)
        FigureCanvasAgg(self.figure)
        self.ax = self.figure.subplots()
        self.figure.subplots_adjust(left=0.1, right=0.98, bottom=0.18, top=0.92)
        self.image = W.Image(format="png", layout=W.Layout(width="560px"))
        self.readout = W.HTML()
        self.table = W.HTML()
        self.errors = W.Output()
        self.lines: list[str] = []
        self.update()
        for c in self.controls.values():
            c.observe(self._on_change, names="value")
        super().__init__([W.HBox([W.VBox([self.controls["model"], self.controls["budget_gb"]]),
                                  W.VBox([self.controls["target"], self.controls["recompute"]])]),
                          self.image, self.readout, self.table, self.errors])

    def _on_change(self, change=None) -> None:
        with errors_shown_in(self.errors, "the planner"):
            self.update()

    def update(self) -> None:
        c = self.controls
        model = self.models[c["model"].value]
        budget, target, recompute = float(c["budget_gb"].value), int(c["target"].value), bool(c["recompute"].value)
        try:
            plans = model.plans(round(budget * GB), target, recompute)
        except ValueError:  # budget below the fixed terms: nothing fits, plan_lines says why
            plans = []
        self.ax.clear()  # the bars change in number and colour; the figure itself is reused
        draw_plan([p.micro_batch_size for p in plans], [p.memory_bytes / GB for p in plans],
                  [p.fits for p in plans], budget, self.ax)
        self.ax.set_yscale("log")
        self.ax.set_title(model.name, fontsize=10)
        self.image.value = _png(self.figure)
        self.lines = plan_lines(model, budget, target, recompute)
        self.readout.value = "<br>".join(html.escape(line) for line in self.lines)
        self.table.value = _table(plans)

    def _repr_mimebundle_(self, **kwargs):
        return with_static_fallback(super()._repr_mimebundle_(**kwargs), self.image.value,
                                    "PlannerWidget: " + "; ".join(self.lines))


def _png(figure: Figure) -> bytes:
    import io
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    return buffer.getvalue()


def _table(plans: list[Plan]) -> str:
    rows = "".join(
        f"<tr><td>{p.micro_batch_size}</td><td>{p.accumulation_steps}</td><td>{p.memory_bytes / GB:.3g}</td>"
        f"<td>{'—' if p.seconds_per_update is None else f'{p.seconds_per_update * 1e3:.3g}'}</td>"
        f"<td>{'yes' if p.fits else 'no'}</td></tr>" for p in plans)
    return ("<table><tr><th>b</th><th>K</th><th>memory (GB)</th><th>ms per update</th><th>fits</th></tr>"
            f"{rows}</table>")


def make_planner_widget(measured: PlannerModel | None = None, model: str = "7B", budget_gb: float = 80.0,
                        target: int = 64, recompute: bool = False) -> PlannerWidget:
    """Build (not display) the planner. `measured` adds a model measured in the notebook (with a time model)."""
    models = {name: paper_planner_model(shape) for name, shape in PRESETS.items()}
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
