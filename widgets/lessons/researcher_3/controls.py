"""Move the effective batch along the fitted steps/examples trade-off curve of McCandlish et al. (2018)."""
from __future__ import annotations

import math

import ipywidgets as W

from widgets.controls.compat import Displayed, Picture, name_picture
from widgets.draw.style import (
    DPI, FastCanvas, apply_style, errors_shown_in, freeze_layout, new_figure, with_static_fallback
)
from widgets.lessons.researcher_3.draw import draw_tradeoff
from widgets.lessons.researcher_3.critical_batch import Tradeoff


def tradeoff_line(fit: Tradeoff, effective_batch: float) -> str:
    """One sentence for effective batch B: its steps and examples against the minima."""
    s, e = fit.steps(effective_batch), fit.examples(effective_batch)
    return (f"K·b = {effective_batch:.0f}: S = {s:.0f} steps ({s / fit.s_min:.2f} x S_min), "
            f"E = {e:.0f} examples ({e / fit.e_min:.2f} x E_min); B_crit = {fit.b_crit:.0f}")


class TradeoffWidget(Displayed, W.VBox):
    """Use `make_tradeoff_widget`."""

    def __init__(self, points, fit: Tradeoff):
        self.fit = fit
        lo, hi = min(B for B, _ in points) / 2, max(B for B, _ in points) * 4
        self.slider = W.FloatLogSlider(value=fit.b_crit, base=2, min=math.log2(lo), max=math.log2(hi), step=0.25,
                                       description="effective batch K·b", readout_format=".0f",
                                       continuous_update=False, style={"description_width": "150px"},
                                       layout=W.Layout(width="460px"))
        self.figure = new_figure(7.2, 4.0)
        ax = self.figure.subplots()
        self.artists = draw_tradeoff(points, fit, ax)
        freeze_layout(apply_style(self.figure))  # then the Axes stay put for the cached backgrounds
        self.canvas = FastCanvas(self.figure, [self.artists["marker"]])
        self.image = Picture(format="png", layout=W.Layout(width=f"{round(7.2 * DPI)}px"))
        self.readout = W.HTML()
        self.errors = W.Output()
        self.update(fit.b_crit)
        self.slider.observe(self._on_change, names="value")
        super().__init__([self.slider, self.image, self.readout, self.errors])

    def _on_change(self, change=None) -> None:
        with errors_shown_in(self.errors, "the trade-off widget"):
            self.update(float(self.slider.value))

    def update(self, effective_batch: float) -> None:
        self.artists["marker"].set_data([self.fit.examples(effective_batch)], [self.fit.steps(effective_batch)])
        self.image.value = self.canvas.png()
        self.text = tradeoff_line(self.fit, effective_batch)
        self.readout.value = self.text
        name_picture(self.image, f"Steps against examples to the target, the fitted trade-off. {self.text}")

    def _repr_mimebundle_(self, **kwargs):
        return with_static_fallback(super()._repr_mimebundle_(**kwargs), self.image.value, f"TradeoffWidget: {self.text}")


def make_tradeoff_widget(points: list[tuple[int, float]], fit: Tradeoff) -> TradeoffWidget:
    """Build (not display) the widget from measured (B, S) `points` and their `fit`, starting at B_crit."""
    if not isinstance(fit, Tradeoff):
        raise TypeError(f"fit must be a Tradeoff (from fit_tradeoff), got {type(fit).__name__}")
    if len(points) < 2:
        raise ValueError(f"points must hold at least two (B, S) pairs, got {len(points)}")
    return TradeoffWidget(points, fit)
