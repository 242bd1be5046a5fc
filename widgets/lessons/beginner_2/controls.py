"""The accumulation explorer: sliders for K and b, one mistake at a time, a live figure and a readout.

The figure is a plain matplotlib `Figure` (never pyplot, so nothing leaks into the notebook) made once;
each change moves its lines in place and sends a fresh PNG to an `Image` widget, which is also what a
page without a kernel (GitHub, nbviewer) shows. Re-running a cell closes the explorer it built before.
"""
from __future__ import annotations

import dataclasses
import functools
import inspect
import math
import sys
import weakref

import ipywidgets as W
import numpy as np
from matplotlib.transforms import ScaledTranslation

from widgets.core.config import OPTIMIZERS, AccumulationConfig, check_int, waits_for
from widgets.core.mistakes import MISTAKES
from widgets.core.training import run_regimes
from widgets.controls.compat import Displayed, Picture, name_picture, set_titles
from widgets.draw.style import (
    DPI, PROJECTOR_DPI, FastCanvas, apply_style, errors_shown_in, new_figure, png_bytes, verdict_list_html,
    with_static_fallback
)
from widgets.lessons.beginner_2.draw import (
    READOUTS, draw_gradient_pile, draw_loss_curves, readout_lines, update_gradient_pile, update_loss_curves
)

# The sliders' ranges, narrower than the config's: a value outside them is refused where it enters
# (`_check_ranges`), since a slider would clamp it silently.
K_RANGE, B_RANGE, LR_RANGE = (1, 16), (1, 64), (0.001, 10.0)
RANGES = {"accumulation_steps": K_RANGE, "micro_batch_size": B_RANGE, "learning_rate": LR_RANGE}
CLIP_OPTIONS = (0.05, 0.1, 0.2, 0.5, 1.0, 2.0)  # max_grad_norm's choices besides off: the gradients are 0.1 to 2
# The mistakes a learner switches most, first in the dropdown.
MAIN_MISTAKES = ("loss_not_divided", "zero_grad_every_micro_step", "step_every_micro_step")
NO_MISTAKE = "none: the correct loop"
DRAWER = ("tail_micro_batches", "max_grad_norm", "warmup_updates")  # the settings some mistakes need
_OFF = {"mistake": "", "max_grad_norm": 0.0}  # the control's value for a setting of None
DEFAULTS = dataclasses.asdict(AccumulationConfig())  # make_accumulation_explorer's defaults
_LIVE: dict[str, weakref.ref] = {}  # the cell that built an explorer -> that explorer (see `_running_cell`)
# 860 x 280 px at 100 dpi: the whole explorer fits one laptop screen (1366x768, file browser open).
FIGURE_INCHES = (8.6, 2.8)
# A figure per panel, side by side in one PNG: new axis limits on one panel redraw that panel alone.
PANEL_MARGINS = (dict(left=0.205, right=0.9753, bottom=0.33, top=0.9), dict(left=0.1547, right=0.97, bottom=0.33, top=0.9))
Y_LABEL_INCHES = 0.7  # from the pile's axis to its label's edge: six characters of ticks at FONT_PT

record_for = functools.lru_cache(maxsize=64)(run_regimes)  # a setting seen again only redraws


class AccumulationExplorer(Displayed, W.VBox):
    """Use `make_accumulation_explorer`; `controls`, `record`, `figures`, `readout`, `show` and `call` are public."""

    def __init__(self, config: AccumulationConfig, readout: str = "plain", dpi: int = DPI):
        self.readout_kind = readout
        self.settings = dataclasses.asdict(config)  # what the controls hold, a waiting mistake included
        self.notes: list[str] = []
        self.controls = _make_controls(config)
        self.readout = W.HTML()
        self.readout.add_class("explorer-readout")  # the browser test reads it by this name
        self.call_text = W.HTML()
        self.call_text.add_class("explorer-call")
        self.errors = W.Output()
        self.record = record_for(config)
        # Fixed Axes (no layout engine): the cached backgrounds must keep their places.
        self.figures = [new_figure(FIGURE_INCHES[0] / 2, FIGURE_INCHES[1], dpi=dpi, layout=None) for _ in PANEL_MARGINS]
        self._axes = [figure.subplots() for figure in self.figures]
        for figure, margins in zip(self.figures, PANEL_MARGINS):
            figure.subplots_adjust(**margins)
        self._pile = draw_gradient_pile(self.record, self._axes[0], readout)
        self._losses = draw_loss_curves(self.record, self._axes[1], readout)
        # The pile's label stays put however wide its ticks grow (up to "−0.025"): the margin holds both.
        self._axes[0].yaxis.set_label_coords(0, 0.5, transform=self._axes[0].transAxes + ScaledTranslation(
            -Y_LABEL_INCHES, 0, self.figures[0].dpi_scale_trans))
        self.canvases = [FastCanvas(apply_style(self.figures[0]), self._pile.piles + self._pile.targets),
                         FastCanvas(apply_style(self.figures[1]), list(self._losses.values()))]
        self.image = Picture(format="png", layout=W.Layout(width=f"{round(FIGURE_INCHES[0] * DPI)}px"))
        self._syncing = False
        self._draw()
        for control in self.controls.values():
            control.observe(self._on_change, names="value")
        c = self.controls  # two controls a row, the drawer's three in one: one laptop screen, drawer open
        self.drawer = set_titles(W.Accordion(
            [W.HBox([c[n] for n in DRAWER])], selected_index=0 if config.mistake and MISTAKES[config.mistake].needs else None,
        ), ["settings some mistakes need: a short last window, clipping, a warmup"])
        bottom = [c["optimizer"]] if readout == "detailed" else []  # optimizers are the developer tier's
        super().__init__([W.HBox([c["accumulation_steps"], c["micro_batch_size"]]),
                          W.HBox([c["learning_rate"], c["mistake"]]), self.drawer, self.image, self.readout,
                          W.HBox([*bottom, self.call_text]), self.errors])
        self.closed = False
        cell = _running_cell()
        if cell is not None:  # the same cell run again: its previous explorer is closed
            previous = _LIVE[cell]() if cell in _LIVE else None
            if previous is not None and previous is not self:
                previous.close()
            _LIVE[cell] = weakref.ref(self)

    def show(self, **settings) -> None:
        """Move the named controls (`explorer.show(mistake="loss_not_divided")`) and show the result."""
        unknown = sorted(set(settings) - set(self.controls))
        if unknown:
            raise TypeError(f"show() takes the explorer's controls {list(self.controls)}, got {unknown}")
        config, _ = _config({**self.settings, **settings})
        _check_ranges(config)
        self._syncing = True  # one redraw below, not one per control moved
        try:
            self.controls["tail_micro_batches"].max = max(0, config.accumulation_steps - 1)
            for name, value in settings.items():
                self.controls[name].value = _OFF[name] if value is None else value
        finally:
            self._syncing = False
        self._on_change()

    def call(self) -> str:
        """The call that builds this explorer as it shows now: the settings that differ from the defaults."""
        now = {**dataclasses.asdict(self.record.config), "readout": self.readout_kind}
        defaults = {**DEFAULTS, "readout": "plain"}
        said = [f"{n}={_literal(now[n])}" for n in inspect.signature(make_accumulation_explorer).parameters
                if n in now and now[n] != defaults[n]]
        return f"make_accumulation_explorer({', '.join(said)})"

    def _on_change(self, change: dict | None = None) -> None:
        """Show the controls' settings; an error is shown under the figure and the explorer stays live."""
        if self._syncing:
            return
        with errors_shown_in(self.errors, "the explorer"):
            self._syncing = True
            try:  # the tail is shorter than a full window: lowering the slider's max clamps its value
                self.controls["tail_micro_batches"].max = max(0, self.controls["accumulation_steps"].value - 1)
            finally:
                self._syncing = False
            wanted = {**self.settings, **{n: None if n in _OFF and c.value == _OFF[n] else c.value
                                          for n, c in self.controls.items()}}
            config, self.notes = _config(wanted)
            self.settings, record = wanted, record_for(config)
            new_run = record is not self.record  # else a mistake that waits for its setting: the same run on show
            if new_run:
                update_gradient_pile(record, self._axes[0], self._pile)
                update_loss_curves(record, self._axes[1], self._losses)
                self.record = record
            self._draw(new_frame=new_run)

    def _draw(self, new_frame: bool = True) -> None:
        """The frame (unless the run on show is the same), the readout (each verdict coloured and marked), its
        words as the picture's name, the call."""
        lines = readout_lines(self.record, self.notes, self.readout_kind)
        with self.image.hold_sync():  # the frame and its name reach the page in one message
            if new_frame:
                self.render()
            name_picture(self.image, "Gradient pile and loss per update. " + "; ".join(lines))
        self.readout.value = verdict_list_html(lines, ("gradients allclose", "learning rates match"))
        self.call_text.value = f"this picture: <code>{self.call()}</code>"

    def render(self, full: bool = False) -> None:
        """Redraw the figure into the image widget (the bare redraw the benchmark compares with)."""
        self.image.value = png_bytes(np.hstack([canvas.rgba(full) for canvas in self.canvases]))

    def close(self) -> None:
        """Close the widgets (layouts and styles included) and free the figure: what re-running the cell does."""
        if self.__dict__.get("closed", True):  # closed already, or never built
            return super().close()
        self.closed = True
        for child in (*self.children, *self.controls.values()):  # the plain readout's hidden optimizer too
            _close_tree(child)
        if isinstance(self.layout, W.Widget):
            self.layout.close()
        self.figures = self.canvases = self._axes = self._pile = self._losses = None
        super().close()

    def _repr_mimebundle_(self, **kwargs):
        """The live widget where a kernel runs; a static PNG and a one-line summary elsewhere."""
        text = "AccumulationExplorer: " + "; ".join(readout_lines(self.record, self.notes, self.readout_kind))
        return with_static_fallback(super()._repr_mimebundle_(**kwargs), self.image.value, text)


def make_accumulation_explorer(
    accumulation_steps: int = DEFAULTS["accumulation_steps"],
    micro_batch_size: int = DEFAULTS["micro_batch_size"],
    learning_rate: float = DEFAULTS["learning_rate"],
    mistake: str | None = DEFAULTS["mistake"],
    num_updates: int = DEFAULTS["num_updates"],
    seed: int = DEFAULTS["seed"],
    *,
    tail_micro_batches: int = DEFAULTS["tail_micro_batches"],
    max_grad_norm: float | None = DEFAULTS["max_grad_norm"],
    warmup_updates: int = DEFAULTS["warmup_updates"],
    optimizer: str = DEFAULTS["optimizer"],
    readout: str = "plain",
    dpi: int = DPI,
) -> AccumulationExplorer:
    """Build (not display) the explorer; a bad setting raises naming it, as does a mistake without its setting.

    `mistake` is None (the correct loop) or a name of `MISTAKES`; `readout` "plain" (the beginner tier)
    or "detailed" (tolerances, symptoms, the optimizer); `dpi` 100 (the screen) to 200 (the projector)."""
    if readout not in READOUTS:
        raise ValueError(f"readout must be one of {READOUTS}, got {readout!r}")
    check_int("dpi", dpi, DPI, PROJECTOR_DPI)
    config = AccumulationConfig(
        accumulation_steps=accumulation_steps, micro_batch_size=micro_batch_size, learning_rate=learning_rate,
        mistake=mistake, num_updates=num_updates, seed=seed, tail_micro_batches=tail_micro_batches,
        max_grad_norm=max_grad_norm, warmup_updates=warmup_updates, optimizer=optimizer,
    )
    _check_ranges(config)
    return AccumulationExplorer(config, readout, dpi)


def _literal(value: object) -> str:
    """A setting as the call spells it: strings in double quotes, floats as the slider shows them (3 digits)."""
    return f'"{value}"' if isinstance(value, str) else f"{value:.3g}" if isinstance(value, float) else str(value)


def _check_ranges(config: AccumulationConfig) -> None:
    """Refuse what the config allows but the explorer's controls cannot show."""
    for name, (low, high) in RANGES.items():
        if not low <= getattr(config, name) <= high:
            raise ValueError(f"{name} must be from {low} to {high} on the explorer, got {getattr(config, name)}")
    if config.max_grad_norm not in (None, *CLIP_OPTIONS):
        raise ValueError(f"max_grad_norm must be None or one of {CLIP_OPTIONS}, got {config.max_grad_norm!r}")
    if config.warmup_updates > config.num_updates:
        raise ValueError(f"warmup_updates must be from 0 to num_updates = {config.num_updates}, got {config.warmup_updates}")


def _config(settings: dict) -> tuple[AccumulationConfig, list[str]]:
    """The config `settings` describe, without a chosen mistake that waits for a setting; a note saying so."""
    mistake = settings["mistake"]
    waits = waits_for(**settings)
    notes = [f"'{MISTAKES[mistake].label}' does nothing yet: it needs {need}" for need in waits.values()]
    return AccumulationConfig(**{**settings, "mistake": None if waits else mistake}), notes


def _make_controls(config: AccumulationConfig) -> dict[str, W.Widget]:
    """One control per setting, named as `make_accumulation_explorer` names it, starting at `config`."""
    drawer = _slider_options(135, 286)
    order = list(dict.fromkeys((*MAIN_MISTAKES, *MISTAKES)))
    return {
        "accumulation_steps": W.IntSlider(value=config.accumulation_steps, min=K_RANGE[0], max=K_RANGE[1],
                                          description="accumulation_steps K", **_slider_options()),
        "micro_batch_size": W.IntSlider(value=config.micro_batch_size, min=B_RANGE[0], max=B_RANGE[1],
                                        description="micro_batch_size b", **_slider_options()),
        "learning_rate": W.FloatLogSlider(value=config.learning_rate, base=10, min=math.log10(LR_RANGE[0]),
                                          max=math.log10(LR_RANGE[1]), step=0.1, readout_format=".3g",
                                          description="learning_rate", **_slider_options()),
        "mistake": W.Dropdown(options=[(NO_MISTAKE, "")] + [(MISTAKES[n].label, n) for n in order],
                              value=config.mistake or "", description="mistake",
                              style={"description_width": "70px"}, layout=W.Layout(width="420px")),
        "tail_micro_batches": W.IntSlider(value=config.tail_micro_batches, min=0, max=config.accumulation_steps - 1,
                                          description="tail_micro_batches", **drawer),
        "max_grad_norm": W.SelectionSlider(options=[("off", 0.0)] + [(f"{v:g}", v) for v in CLIP_OPTIONS],
                                           description="max_grad_norm", **drawer,
                                           index=CLIP_OPTIONS.index(config.max_grad_norm) + 1 if config.max_grad_norm else 0),
        "warmup_updates": W.IntSlider(value=config.warmup_updates, min=0, max=config.num_updates,
                                      description="warmup_updates", **drawer),
        "optimizer": W.Dropdown(options=[(label, key) for key, label in OPTIMIZERS.items()], value=config.optimizer,
                                description="optimizer", style={"description_width": "90px"},
                                layout=W.Layout(width="260px")),
    }


def _slider_options(label_width: int = 160, width: int = 430) -> dict:
    """What every slider here shares: it updates on release (or a key press), not while dragging."""
    return dict(continuous_update=False, style={"description_width": f"{label_width}px"},
                layout=W.Layout(width=f"{width}px"))


def _running_cell() -> str | None:
    """The id of the cell running now, as JupyterLab and Notebook 7 send it; None outside a kernel or without one."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    kernel = getattr(shell, "kernel", None)
    if kernel is None:
        return None
    try:
        parent = kernel.get_parent("shell")
    except Exception:  # noqa: BLE001 - an older or unusual kernel: no registry, nothing closed
        return None
    cell = (parent.get("metadata") or {}).get("cellId")
    return str(cell) if cell else None


def _close_tree(widget: W.Widget) -> None:
    """Close a widget, its children, and the Layout and Style widgets it holds."""
    for child in getattr(widget, "children", ()):
        _close_tree(child)
    for part in (getattr(widget, "layout", None), getattr(widget, "style", None)):
        if isinstance(part, W.Widget):
            part.close()
    widget.close()
