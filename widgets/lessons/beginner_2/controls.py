"""The accumulation explorer: sliders for K and b, one mistake at a time, a live figure and a readout.

The figure is a plain matplotlib `Figure` (never pyplot, so nothing leaks into the notebook)
made once; each change moves its lines in place and sends a fresh PNG to an `Image` widget.
Displayed without a kernel (GitHub, nbviewer) the explorer falls back to that PNG.

Speed: a setting is trained once and its record kept, and the settings one move away are trained
while the kernel is idle (`widgets.lessons.beginner_2.controls_ahead`); a setting trained before only
redraws. Leaks: re-running the cell that built an explorer closes the one it built before.
"""
from __future__ import annotations

import math
import sys
import weakref
from collections import OrderedDict

import ipywidgets as W

from widgets.core.shared import B_RANGE, CLIP_OPTIONS, K_RANGE, LR_RANGE  # the slider ranges, shared with share codes
from widgets.core.config import OPTIMIZERS, AccumulationConfig, check_int, config_without_waiting_mistake
from widgets.core.mistakes import MISTAKES
from widgets.lab import presets
from widgets.controls.names import Picture, name_picture
from widgets.controls.readout import verdict_list_html
from widgets.controls.compat import Displayed, set_titles, set_tooltip
from widgets.draw.frames import FastCanvas, errors_shown_in, with_static_fallback
from widgets.draw.style import DPI, PROJECTOR_DPI, apply_style, new_figure
from widgets.draw.training_plots import draw_gradient_pile, draw_loss_curves, update_gradient_pile, update_loss_curves
from widgets.core.training import RunRecord
from widgets.lessons.beginner_2.controls_ahead import TrainsAhead
from widgets.lessons.beginner_2.readout import READOUTS, readout_lines

# The mistakes a learner switches most, first in the list: choosing one of them is one move ahead.
MAIN_MISTAKES = ("loss_not_divided", "zero_grad_every_micro_step", "step_every_micro_step")
NO_MISTAKE = "none: the correct loop"
SETTINGS = ("tail_micro_batches", "max_grad_norm", "warmup_updates")  # what some mistakes need
_SETTINGS_KEPT = 64  # combinations of control values checked, with their config (a revisit checks nothing)
_LIVE: dict[str, weakref.ref] = {}  # the cell that built an explorer -> that explorer (see `_running_cell`)
# 860 x 280 px at 100 dpi: shown at its natural size (text 11 pt) within the notebook's column at
# 1366x768 with the file browser open, and the whole explorer within one screen (tests/test_browser.py).
FIGURE_INCHES = (8.6, 2.8)
FIGURE_MARGINS = dict(left=0.08, right=0.985, bottom=0.33, top=0.9, wspace=0.22)


class AccumulationExplorer(TrainsAhead, Displayed, W.VBox):
    """Use `make_accumulation_explorer`; `controls`, `drawer`, `record`, `figure` and `readout` are public.
    `train_ahead` and `trained_settings` come from `TrainsAhead` (the records kept, the work ahead)."""

    def __init__(self, config: AccumulationConfig, readout: str = "plain", dpi: int = DPI):
        self._start_ahead(MAIN_MISTAKES)
        self.readout_kind = readout
        self._settings: OrderedDict[tuple, tuple[AccumulationConfig, list[str]]] = OrderedDict()
        self._base = config
        self.controls = {
            "accumulation_steps": W.IntSlider(
                value=config.accumulation_steps, min=K_RANGE[0], max=K_RANGE[1],
                description="accumulation_steps K", **_slider_options(),
            ),
            "micro_batch_size": W.IntSlider(
                value=config.micro_batch_size, min=B_RANGE[0], max=B_RANGE[1],
                description="micro_batch_size b", **_slider_options(),
            ),
            "learning_rate": W.FloatLogSlider(
                value=config.learning_rate, base=10, min=math.log10(LR_RANGE[0]), max=math.log10(LR_RANGE[1]),
                step=0.1, readout_format=".3g",
                description="learning_rate", **_slider_options(),
            ),
        }
        self.controls["optimizer"] = W.Dropdown(
            options=[(label, key) for key, label in OPTIMIZERS.items()], value=config.optimizer,
            description="optimizer", style={"description_width": "90px"}, layout=W.Layout(width="260px"),
        )
        order = list(dict.fromkeys((*MAIN_MISTAKES, *MISTAKES)))
        self.controls["mistake"] = W.Dropdown(
            options=[(NO_MISTAKE, "")] + [(MISTAKES[n].label, n) for n in order], value=config.mistake or "",
            description="mistake", style={"description_width": "70px"}, layout=W.Layout(width="420px"),
        )
        self.controls.update(_setting_controls(config))
        self.notes: list[str] = []
        self._syncing = False
        self.readout = W.HTML()
        self.readout.add_class("explorer-readout")  # the browser test reads it by this name
        self.errors = W.Output()
        self.record = self._record_for(config)
        # Fixed Axes (no layout engine): the cached backgrounds must keep their places. Room below
        # each panel for its legend, off the data; the pile's x axis spans this K (`_move_lines`).
        self.figure = new_figure(*FIGURE_INCHES, dpi=dpi, layout=None)
        self.figure.subplots_adjust(**FIGURE_MARGINS)
        ax_pile, ax_loss = self.figure.subplots(1, 2)
        self._axes = (ax_pile, ax_loss)
        self._pile_artists = draw_gradient_pile(self.record, ax_pile)
        self._loss_lines = draw_loss_curves(self.record, ax_loss)
        apply_style(self.figure)
        moving = self._pile_artists.piles + self._pile_artists.targets + list(self._loss_lines.values())
        self.canvas = FastCanvas(self.figure, moving)
        self.canvas.defer_boxes = True  # a slider change does not wait for them; training ahead reads them
        self.image = Picture(format="png", layout=W.Layout(width=f"{round(FIGURE_INCHES[0] * DPI)}px"))
        self.render()
        self.readout.value = readout_html(self.record, kind=readout)
        self._name_image()
        self._last_values = self._control_values()
        self._config_and_notes()  # the starting values, checked once like any other setting
        for control in self.controls.values():
            control.observe(self._on_change, names="value")
        # Two controls a row, the drawer's three in one row: the whole explorer, drawer open, fits
        # one laptop screen (1366x768, JupyterLab's file browser open).
        c = self.controls
        rows = [W.HBox([c["accumulation_steps"], c["micro_batch_size"]]), W.HBox([c["learning_rate"], c["mistake"]])]
        self.drawer = set_titles(W.Accordion(
            [W.HBox([c[n] for n in SETTINGS])],
            selected_index=0 if config.mistake and MISTAKES[config.mistake].needs else None,
        ), ["settings some mistakes need: a short last window, clipping, a warmup"])
        self.share = set_tooltip(W.Button(description="share these settings", layout=W.Layout(width="auto")),
                                 "Show a short code for make_accumulation_explorer(state=...) that gives these settings")
        self.share_text = W.HTML()
        self.share.on_click(self._show_share_code)
        bottom = [c["optimizer"]] if readout == "detailed" else []  # optimizers are the developer tier's
        super().__init__([*rows, self.drawer, self.image, self.readout,
                          W.HBox([*bottom, self.share, self.share_text]), self.errors])
        self.closed = False  # `close()` sets it; until here there is nothing to close
        self._plan_ahead(config, self._last_values, self._last_values)  # the first move, too, is likely one notch away
        cell = _running_cell()
        if cell is not None:  # the same cell run again: its previous explorer is closed
            previous = _LIVE[cell]() if cell in _LIVE else None
            if previous is not None and previous is not self:
                previous.close()
            _LIVE[cell] = weakref.ref(self)

    def share_code(self) -> str:
        """A short code for the current settings: `make_accumulation_explorer(state=code)` shows the
        same picture (paste it into the chat so that a room sees one setting)."""
        c = self.current_config()
        return presets.encode_state(dict(
            accumulation_steps=c.accumulation_steps, micro_batch_size=c.micro_batch_size,
            learning_rate=c.learning_rate, mistake=c.mistake, num_updates=c.num_updates, seed=c.seed,
            tail_micro_batches=c.tail_micro_batches, max_grad_norm=c.max_grad_norm,
            warmup_updates=c.warmup_updates, optimizer=c.optimizer,
        ))

    def _show_share_code(self, _button=None) -> None:
        with errors_shown_in(self.errors, "the share code"):
            self.share_text.value = f"<code>make_accumulation_explorer(state=\"{self.share_code()}\")</code>"

    def current_config(self) -> AccumulationConfig:
        """The configuration the controls describe now (raises ValueError if they are out of range)."""
        return self._config_and_notes()[0]

    def _control_values(self) -> tuple:
        return tuple(control.value for control in self.controls.values())

    def _config_and_notes(self) -> tuple[AccumulationConfig, list[str]]:
        """The config the controls describe, and a note if the chosen mistake is left out because it
        waits for a setting. Checked once per new combination of control values, by the config; a
        revisit checks nothing."""
        values = self._control_values()
        if values in self._settings:
            self._settings.move_to_end(values)
            return self._settings[values]
        c = self.controls
        config, waiting = config_without_waiting_mistake(
            accumulation_steps=c["accumulation_steps"].value,
            micro_batch_size=c["micro_batch_size"].value,
            learning_rate=float(c["learning_rate"].value),
            num_updates=self._base.num_updates,
            num_examples=self._base.num_examples,
            seed=self._base.seed,
            mistake=c["mistake"].value or None,
            tail_micro_batches=c["tail_micro_batches"].value,
            max_grad_norm=c["max_grad_norm"].value or None,
            warmup_updates=c["warmup_updates"].value,
            optimizer=c["optimizer"].value,
        )
        label = MISTAKES[c["mistake"].value].label if waiting else ""
        notes = [f"'{label}' does nothing yet: it needs {need}" for need in waiting.values()]
        self._settings[values] = (config, notes)
        if len(self._settings) > _SETTINGS_KEPT:
            self._settings.popitem(last=False)
        return config, notes

    def _on_change(self, change: dict | None = None) -> None:
        """Recompute and redraw; an error is shown under the figure and the explorer stays live."""
        if self._syncing:  # a control being adjusted below; one redraw follows
            return
        with errors_shown_in(self.errors, "the explorer"):
            self._syncing = True
            try:  # the tail is shorter than a full window; lowering max clamps the value
                self.controls["tail_micro_batches"].max = max(0, self.controls["accumulation_steps"].value - 1)
            finally:
                self._syncing = False
            config, notes = self._config_and_notes()
            self.show(config, notes)
            before, self._last_values = self._last_values, self._control_values()
            self._plan_ahead(config, self._last_values, before)

    def close(self) -> None:
        """Close the widgets (layouts and styles included), stop training ahead, free the figure and
        the kept records: what re-running the cell does to the explorer it built before."""
        if self.__dict__.get("closed", True):  # closed already, or never built
            return super().close()
        self.closed = True
        self._stop_ahead()
        for child in (*self.children, *self.controls.values()):  # a control not shown (the plain
            _close_tree(child)  # readout hides the optimizer) is closed too
        if isinstance(self.layout, W.Widget):
            self.layout.close()
        self.figure = self.canvas = self._axes = self._pile_artists = self._loss_lines = None
        self._settings = OrderedDict()
        super().close()

    def show(self, config: AccumulationConfig, notes: list[str] | tuple[str, ...] = ()) -> None:
        """Show `config`: recompute, move the lines in place, redraw, refresh the readout (+ `notes`)."""
        self.notes = list(notes)
        self.record = self._record_for(config)
        self._move_lines(self.record)
        self.render()
        self.readout.value = readout_html(self.record, self.notes, kind=self.readout_kind)
        self._name_image()

    def _name_image(self) -> None:
        """The figure's text alternative: what the readout says, so a screen reader hears the numbers."""
        name_picture(self.image, f"Gradient pile and loss per update. {readout_text(self.record, self.notes, self.readout_kind)}")

    def _move_lines(self, record: RunRecord) -> None:
        update_gradient_pile(record, self._axes[0], self._pile_artists)
        update_loss_curves(record, self._axes[1], self._loss_lines)

    def _prepare_frame(self, record: RunRecord) -> None:
        """Draw ahead the background that showing `record` from here would need (new axis limits cost
        a redraw of the text), then put the lines and the limits back as they were."""
        limits = [(ax.get_xlim(), ax.get_ylim()) for ax in self._axes]
        try:
            self._move_lines(record)
            self.canvas.prepare()
        finally:
            self._move_lines(self.record)
            for ax, (x, y) in zip(self._axes, limits):
                ax.set_xlim(x)
                ax.set_ylim(y)

    def render(self, full: bool = False) -> None:
        """Redraw the figure into the image widget (the bare redraw the benchmark compares with)."""
        self.image.value = self.canvas.png(full=full)

    def _repr_mimebundle_(self, **kwargs):
        """The live widget where a kernel runs; a static PNG and a one-line summary elsewhere."""
        text = f"AccumulationExplorer: {readout_text(self.record, self.notes, self.readout_kind)}"
        return with_static_fallback(super()._repr_mimebundle_(**kwargs), self.image.value, text)


def readout_text(record: RunRecord, notes: list[str] | tuple[str, ...] = (), kind: str = "plain") -> str:
    """The readout in one line."""
    return "; ".join(readout_lines(record, notes, kind))


_VERDICTS = ("gradients allclose", "learning rates match")


def readout_html(record: RunRecord, notes: list[str] | tuple[str, ...] = (), kind: str = "plain") -> str:
    """The readout as HTML for the `HTML` widget; each verdict is coloured and also spelled out
    (a plain readout's line ends in ✓ or ✗, a detailed one says `True` or `False` and adds the mark)."""
    return verdict_list_html(readout_lines(record, notes, kind), _VERDICTS)


_DEFAULT = AccumulationConfig()  # the explorer starts from the config's defaults (as do share codes)


def make_accumulation_explorer(
    accumulation_steps: int = _DEFAULT.accumulation_steps,
    micro_batch_size: int = _DEFAULT.micro_batch_size,
    learning_rate: float = _DEFAULT.learning_rate,
    mistake: str | None = _DEFAULT.mistake,
    num_updates: int = _DEFAULT.num_updates,
    seed: int = _DEFAULT.seed,
    *,
    tail_micro_batches: int = _DEFAULT.tail_micro_batches,
    max_grad_norm: float | None = _DEFAULT.max_grad_norm,
    warmup_updates: int = _DEFAULT.warmup_updates,
    optimizer: str = _DEFAULT.optimizer,
    readout: str = "plain",
    preset: str | None = None,
    state: str | None = None,
    dpi: int = DPI,
) -> AccumulationExplorer:
    """Build (not display) the explorer. Bad starting values raise a ValueError naming the parameter;
    so does a mistake without the setting it needs (e.g. `forget_final_step` without a tail).
    `mistake` is None (the correct loop) or one name of `widgets.core.mistakes.MISTAKES`: one at a
    time, as a dropdown switches it live. `readout` is "plain" (each thing as people say it: the
    beginner tier and the projector) or "detailed" (tolerances, the optimizer dropdown, the symptoms
    with their numbers: the developer tier). `optimizer` is "sgd" or "adamw".

    In a classroom: `preset="forgot-to-divide"` starts from a named demo (`widgets.lab.presets.PRESETS`),
    and `state="GA2-..."` from the code another explorer's `share_code()` gave; either replaces the
    other settings (not `readout`). A bad or stale code raises a ValueError saying what is wrong with it.
    `dpi`: the figure's pixels per inch, 100 (`widgets.draw.style.DPI`) to 200 (`PROJECTOR_DPI`, the
    projector view: twice the pixels, shown at the same size, sharp when enlarged)."""
    if readout not in READOUTS:
        raise ValueError(f"readout must be one of {READOUTS}, got {readout!r}")
    check_int("dpi", dpi, DPI, PROJECTOR_DPI)
    if preset is not None or state is not None:
        if preset is not None and state is not None:
            raise ValueError("pass preset or state, not both")
        settings = presets.preset(preset) if preset is not None else presets.decode_state(state)
        return make_accumulation_explorer(**settings, readout=readout, dpi=dpi)
    config = presets.explorer_config(dict(  # the explorer's ranges and options, checked as share codes are
        accumulation_steps=accumulation_steps, micro_batch_size=micro_batch_size, learning_rate=learning_rate,
        mistake=mistake, num_updates=num_updates, seed=seed, tail_micro_batches=tail_micro_batches,
        max_grad_norm=max_grad_norm, warmup_updates=warmup_updates, optimizer=optimizer,
    ))
    return AccumulationExplorer(config, readout, dpi)


def _running_cell() -> str | None:
    """The id of the notebook cell running now, as JupyterLab and Notebook 7 send it; None outside a
    kernel or without an id (then nothing is closed: two cells may hold the same code)."""
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


def _slider_options(label_width: int = 160, width: int = 430) -> dict:
    """Keyword arguments every slider here shares: update on release (or key press), not while dragging."""
    return dict(
        continuous_update=False, style={"description_width": f"{label_width}px"}, layout=W.Layout(width=f"{width}px")
    )


def _setting_controls(config: AccumulationConfig) -> dict[str, W.Widget]:
    """The settings some mistakes need: the tail (at most K - 1), clipping (off by default), the warmup."""
    clip = W.SelectionSlider(
        options=[("off", 0.0)] + [(f"{v:g}", v) for v in CLIP_OPTIONS], description="max_grad_norm",
        **_slider_options(135, 286),
    )
    clip.index = CLIP_OPTIONS.index(config.max_grad_norm) + 1 if config.max_grad_norm else 0
    return {
        "tail_micro_batches": W.IntSlider(
            value=config.tail_micro_batches, min=0, max=config.accumulation_steps - 1, description="tail_micro_batches",
            **_slider_options(135, 286),
        ),
        "max_grad_norm": clip,
        "warmup_updates": W.IntSlider(
            value=config.warmup_updates, min=0, max=config.num_updates, description="warmup_updates",
            **_slider_options(135, 286),
        ),
    }
