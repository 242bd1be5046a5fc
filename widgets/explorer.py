"""The accumulation explorer: sliders for K and b, bug switches, a live figure and a readout.

The figure is a plain matplotlib `Figure` (never pyplot, so nothing leaks into the notebook)
made once; each change moves its lines in place and sends a fresh PNG to an `Image` widget.
Displayed without a kernel (GitHub, nbviewer) the explorer falls back to that PNG.
"""
from __future__ import annotations

import html
from collections import OrderedDict

import ipywidgets as W
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from widgets.config import BUGS, AccumulationConfig
from widgets.plots import FastCanvas, draw_gradient_pile, draw_loss_curves, update_gradient_pile, update_loss_curves
from widgets.training import RunRecord, run_regimes

K_RANGE = (1, 16)
B_RANGE = (1, 64)
LR_RANGE = (0.001, 10.0)
BUG_LABELS = {
    "loss_not_divided": "loss not divided by K",
    "zero_grad_every_micro_step": "zero_grad every micro-step",
    "step_every_micro_step": "optimizer step every micro-step",
}
_CACHE_SIZE = 64


class AccumulationExplorer(W.VBox):
    """Use `make_accumulation_explorer`; `controls`, `record`, `figure` and `readout` are public."""

    def __init__(self, config: AccumulationConfig):
        self._cache: OrderedDict[AccumulationConfig, RunRecord] = OrderedDict()
        self._base = config
        self.controls = {
            "accumulation_steps": W.IntSlider(
                value=config.accumulation_steps, min=K_RANGE[0], max=K_RANGE[1],
                description="accumulation_steps K", continuous_update=False, style={"description_width": "170px"},
                layout=W.Layout(width="420px"),
            ),
            "micro_batch_size": W.IntSlider(
                value=config.micro_batch_size, min=B_RANGE[0], max=B_RANGE[1],
                description="micro_batch_size b", continuous_update=False, style={"description_width": "170px"},
                layout=W.Layout(width="420px"),
            ),
            "learning_rate": W.FloatLogSlider(
                value=config.learning_rate, base=10, min=-3, max=1, step=0.1, readout_format=".3g",
                description="learning_rate", continuous_update=False, style={"description_width": "170px"},
                layout=W.Layout(width="420px"),
            ),
        }
        for name, label in BUG_LABELS.items():
            self.controls[name] = W.Checkbox(value=name in config.bugs, description=f"bug: {label}", indent=False)
        self.readout = W.HTML()
        self.errors = W.Output()
        self.record = self._run(config)
        self.figure = Figure(figsize=(10, 3.6), dpi=72)
        self.figure.subplots_adjust(left=0.08, right=0.98, bottom=0.14, top=0.9, wspace=0.22)
        FigureCanvasAgg(self.figure)
        ax_pile, ax_loss = self.figure.subplots(1, 2)
        self._axes = (ax_pile, ax_loss)
        self._pile_artists = draw_gradient_pile(self.record, ax_pile, max_steps=K_RANGE[1])
        self._loss_lines = draw_loss_curves(self.record, ax_loss)
        moving = self._pile_artists.piles + self._pile_artists.targets + list(self._loss_lines.values())
        self.canvas = FastCanvas(self.figure, moving)
        self.image = W.Image(format="png", layout=W.Layout(width="720px"))
        self.render()
        self.readout.value = readout_html(self.record)
        for control in self.controls.values():
            control.observe(self._on_change, names="value")
        sliders = W.VBox([self.controls[n] for n in ("accumulation_steps", "micro_batch_size", "learning_rate")])
        bugs = W.VBox([self.controls[n] for n in BUG_LABELS])
        super().__init__([W.HBox([sliders, bugs]), self.image, self.readout, self.errors])

    def current_config(self) -> AccumulationConfig:
        """The configuration the controls describe now (raises ValueError if they are out of range)."""
        c = self.controls
        return AccumulationConfig(
            accumulation_steps=c["accumulation_steps"].value,
            micro_batch_size=c["micro_batch_size"].value,
            learning_rate=float(c["learning_rate"].value),
            num_updates=self._base.num_updates,
            num_examples=self._base.num_examples,
            seed=self._base.seed,
            bugs=frozenset(n for n in BUG_LABELS if c[n].value),
        )

    def _run(self, config: AccumulationConfig) -> RunRecord:
        """Run (or reuse) the three regimes for `config`; keeps the last few records."""
        if config in self._cache:
            self._cache.move_to_end(config)
            return self._cache[config]
        record = run_regimes(config)
        self._cache[config] = record
        if len(self._cache) > _CACHE_SIZE:
            self._cache.popitem(last=False)
        return record

    def _on_change(self, change: dict | None = None) -> None:
        """Recompute and redraw; an error is shown under the figure and the explorer stays live."""
        try:
            self.update(self.current_config())
            self.errors.outputs = ()
        except Exception as error:  # a callback must never take the explorer down
            self.errors.outputs = ()
            self.errors.append_stdout(f"Could not update the explorer: {type(error).__name__}: {error}\n")

    def update(self, config: AccumulationConfig) -> None:
        """Show `config`: recompute, move the lines in place, redraw, refresh the readout."""
        self.record = self._run(config)
        update_gradient_pile(self.record, self._axes[0], self._pile_artists, max_steps=K_RANGE[1])
        update_loss_curves(self.record, self._axes[1], self._loss_lines)
        self.render()
        self.readout.value = readout_html(self.record)

    def render(self, full: bool = False) -> None:
        """Redraw the figure into the image widget (the bare redraw the benchmark compares with)."""
        self.image.value = self.canvas.png(full=full)

    def _repr_mimebundle_(self, **kwargs):
        """The live widget where a kernel runs; a static PNG and a one-line summary elsewhere."""
        bundle = super()._repr_mimebundle_(**kwargs)
        data = bundle[0] if isinstance(bundle, tuple) else bundle
        data["image/png"] = self.image.value
        data["text/plain"] = f"AccumulationExplorer: {readout_text(self.record)}"
        return bundle


def readout_lines(record: RunRecord) -> list[str]:
    """The explorer's readout as plain sentences, all computed from `record`."""
    c = record.config
    K, b = c.accumulation_steps, c.micro_batch_size
    verdict = "allclose: True" if record.allclose else "allclose: False"
    lines = [
        f"effective_batch_size = K x b = {K} x {b} = {c.effective_batch_size}",
        f"max |accumulated - big-batch gradient| = {record.max_grad_diff:.2e} -> {verdict}",
        f"forward/backward passes per update: accumulated {K}, big batch 1 (time grows with K)",
        f"activation memory of the accumulated run: b / (K x b) = 1/{K} of the big batch (memory grows with b)",
    ]
    if c.bugs:
        lines.append("bugs on: " + ", ".join(BUG_LABELS[n] for n in sorted(c.bugs)))
        if K == 1:
            lines.append("with K = 1 there is nothing to accumulate, so these bugs change nothing")
    for regime, update in record.diverged_at.items():
        if update is not None:
            lines.append(
                f"the {regime.replace('_', ' ')} run diverged at update {update} (loss or gradient not finite): "
                "lower the learning rate"
            )
    return lines


def readout_text(record: RunRecord) -> str:
    """The readout in one line."""
    return "; ".join(readout_lines(record))


def readout_html(record: RunRecord) -> str:
    """The readout as HTML for the `HTML` widget; the verdict is coloured and also spelled out."""
    items = []
    for line in readout_lines(record):
        text = html.escape(line)
        if "allclose: True" in line:
            text = text.replace("allclose: True", "<b style='color:#009E73'>allclose: True ✓</b>")
        elif "allclose: False" in line:
            text = text.replace("allclose: False", "<b style='color:#D55E00'>allclose: False ✗</b>")
        items.append(f"<li>{text}</li>")
    return "<ul style='margin:0'>" + "".join(items) + "</ul>"


def make_accumulation_explorer(
    accumulation_steps: int = 4,
    micro_batch_size: int = 8,
    learning_rate: float = 0.1,
    bugs: tuple[str, ...] | frozenset[str] = (),
    num_updates: int = 12,
    seed: int = 0,
) -> AccumulationExplorer:
    """Build (not display) the explorer. Bad starting values raise a ValueError naming the parameter."""
    from widgets.config import check_bugs, check_float, check_int

    check_int("accumulation_steps", accumulation_steps, *K_RANGE)
    check_int("micro_batch_size", micro_batch_size, *B_RANGE)
    check_float("learning_rate", learning_rate, *LR_RANGE, low_inclusive=True)
    check_bugs(bugs, BUGS)
    config = AccumulationConfig(
        accumulation_steps=accumulation_steps, micro_batch_size=micro_batch_size,
        learning_rate=learning_rate, bugs=frozenset(bugs) if not isinstance(bugs, str) else frozenset([bugs]),
        num_updates=num_updates, seed=seed,
    )
    return AccumulationExplorer(config)
