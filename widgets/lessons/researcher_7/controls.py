"""Move the number of stages p and micro-batches m and watch the pipeline's bubble and activation memory."""
from __future__ import annotations

import io

import ipywidgets as W

from widgets.controls.compat import Displayed, Picture, name_picture
from widgets.core.config import check_int
from widgets.draw.style import DPI, apply_style, errors_shown_in, new_figure, with_static_fallback
from widgets.lessons.researcher_7.draw import draw_in_flight, draw_timeline
from widgets.lessons.researcher_7.pipeline import SCHEDULES, Timeline, bubble_formula, simulate

MAX_STAGES, MAX_MICRO_BATCHES = 8, 32


def pipeline_readout(gpipe: Timeline, one_f_one_b: Timeline) -> str:
    """One line: the bubble measured on both grids against (p - 1) / (m + p - 1), and stage 0's peak activations."""
    p, m = gpipe.stages, gpipe.micro_batches
    return (f"p = {p}, m = {m}: bubble measured {gpipe.bubble_fraction:.3f} (GPipe), {one_f_one_b.bubble_fraction:.3f} "
            f"(1F1B), formula (p-1)/(m+p-1) = {bubble_formula(p, m):.3f}; stage 0 holds up to "
            f"{gpipe.peak_in_flight()[0]} micro-batches' activations under GPipe, {one_f_one_b.peak_in_flight()[0]} "
            "under 1F1B")


class PipelineExplorer(Displayed, W.VBox):
    """Use `make_pipeline_explorer`."""

    def __init__(self, stages: int, micro_batches: int, schedule: str):
        style, layout = {"description_width": "150px"}, W.Layout(width="420px")
        self.controls = {
            "stages": W.IntSlider(value=stages, min=1, max=MAX_STAGES, description="stages p", style=style,
                                  layout=layout, continuous_update=False),
            "micro_batches": W.IntSlider(value=micro_batches, min=1, max=MAX_MICRO_BATCHES, style=style,
                                         description="micro-batches m", layout=layout, continuous_update=False),
            "schedule": W.ToggleButtons(options=SCHEDULES, value=schedule, description="timeline drawn"),
        }
        self.figure = new_figure(8.6, 5.6)  # laid out again at each redraw: the cells change with p and m
        self.ax_timeline, self.ax_memory = self.figure.subplots(2, 1, height_ratios=(3, 2))
        self.image = Picture(format="png", layout=W.Layout(width=f"{round(8.6 * DPI)}px"))
        self.readout = W.HTML()
        self.errors = W.Output()
        self.update()
        for control in self.controls.values():
            control.observe(self._on_change, names="value")
        super().__init__([*self.controls.values(), self.image, self.readout, self.errors])

    def _on_change(self, change=None) -> None:
        with errors_shown_in(self.errors, "the pipeline explorer"):
            self.update()

    def update(self) -> None:
        """Simulate both schedules, redraw the one chosen and the activation bars in the same figure."""
        p, m = self.controls["stages"].value, self.controls["micro_batches"].value
        timelines = {s: simulate(s, p, m) for s in SCHEDULES}
        self.text = pipeline_readout(timelines["gpipe"], timelines["1f1b"])  # first: a failure leaves the figure as it was
        for ax in (self.ax_timeline, self.ax_memory):
            ax.clear()  # the number of cells changes with p and m: the axes are redrawn, the figure is reused
        draw_timeline(timelines[self.controls["schedule"].value], self.ax_timeline, label_cells=p * m <= 64)
        draw_in_flight(list(timelines.values()), self.ax_memory)
        buffer = io.BytesIO()
        apply_style(self.figure).savefig(buffer, format="png")
        self.image.value = buffer.getvalue()
        self.readout.value = self.text
        name_picture(self.image, f"Pipeline timeline and activation memory per stage. {self.text}")

    def _repr_mimebundle_(self, **kwargs):
        return with_static_fallback(super()._repr_mimebundle_(**kwargs), self.image.value, f"PipelineExplorer: {self.text}")


def make_pipeline_explorer(stages: int = 4, micro_batches: int = 8, schedule: str = "1f1b") -> PipelineExplorer:
    """Build (not display) the explorer: sliders for p and m, the timeline of `schedule`, both schedules' memory."""
    check_int("stages", stages, 1, MAX_STAGES)
    check_int("micro_batches", micro_batches, 1, MAX_MICRO_BATCHES)
    if schedule not in SCHEDULES:
        raise ValueError(f"schedule must be one of {SCHEDULES}, got {schedule!r}")
    return PipelineExplorer(stages, micro_batches, schedule)
