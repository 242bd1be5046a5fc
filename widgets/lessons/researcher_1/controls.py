"""The token-length-spread widget: the per-micro-batch normaliser drifts with the spread of lengths; the window's not."""
from __future__ import annotations

from typing import Mapping, Sequence

import ipywidgets as W

from widgets.core.accumulation import real_tokens
from widgets.core.config import check_float
from widgets.core.accumulation import below
from widgets.controls.compat import Displayed, Picture, name_picture
from widgets.draw.style import (
    DPI, OKABE_ITO, TITLE_PT, FastCanvas, apply_style, errors_shown_in, freeze_layout, new_figure,
    verdict_list_html, with_static_fallback
)
from widgets.lessons.researcher_1.draw import FLOOR, draw_spread_gap
from widgets.research.tokens import (
    NORMALISERS,
    TinyCausalLM,
    accumulated_token_gradient,
    big_batch_token_gradient,
    make_token_batch,
    normaliser_gap,
    split_window,
)

NUM_SEQUENCES = 16
MAX_LEN = 24
K_OPTIONS = (1, 2, 4, 8, 16)  # the divisors of the 16 sequences of the window
FIGURE_INCHES = (8.6, 3.4)  # 860 px wide: the notebook's column at 1366x768, text at 11 pt


def spread_readout(length_spread: float, accumulation_steps: int, seed: int = 0) -> dict:
    """Everything the widget shows for one setting (checked by the widget): tokens per micro-batch, losses, gaps."""
    batch = make_token_batch(NUM_SEQUENCES, MAX_LEN, length_spread, seed=seed)
    model = TinyCausalLM(seed=seed)
    reference = big_batch_token_gradient(model, batch)
    tokens = [real_tokens(batch.labels[s]) for s in split_window(batch, accumulation_steps)]
    out = {"tokens": tokens, "big_batch_loss": reference.loss}
    for name in NORMALISERS:
        run = accumulated_token_gradient(model, batch, accumulation_steps, name)
        gap = normaliser_gap(reference, run)
        out[name] = {"loss": run.loss, "grad_gap": gap.grad_gap, "allclose": gap.allclose}
    return out


def spread_readout_lines(length_spread: float, accumulation_steps: int, r: Mapping) -> list[str]:
    lines = [f"length_spread = {length_spread:.2f}, accumulation_steps K = {accumulation_steps}: "
             f"real tokens per micro-batch {r['tokens']} (window: {sum(r['tokens'])})",
             f"big-batch loss {r['big_batch_loss']:.6f}"]
    for name, label in (("per_micro_batch", "per micro-batch mean / K"), ("window", "window token count")):
        verdict = "allclose: True" if r[name]["allclose"] else "allclose: False"
        # the claim: an exact normaliser lands below 1e-14
        gap = below(r[name]["grad_gap"], 1e-14) if r[name]["allclose"] else f"{r[name]['grad_gap']:.1e}"
        lines.append(f"{label}: loss {r[name]['loss']:.6f}, gradient gap {gap} -> {verdict}")
    return lines


class TokenSpreadWidget(Displayed, W.VBox):
    """Use `make_token_spread_widget`; `controls`, `figure`, `readout`, `errors`, `result` are public."""

    def __init__(self, length_spread: float, accumulation_steps: int, sweep: Mapping[str, Sequence[float]]):
        self.controls = {
            "length_spread": W.FloatSlider(value=length_spread, min=0.0, max=1.0, step=0.05, readout_format=".2f",
                                           description="length_spread", continuous_update=False),
            "accumulation_steps": W.SelectionSlider(options=list(K_OPTIONS), value=accumulation_steps,
                                                    description="accumulation_steps K", continuous_update=False),
        }
        for control in self.controls.values():
            control.style = {"description_width": "150px"}
            control.layout = W.Layout(width="420px")
        self.readout = W.HTML()
        self.errors = W.Output()
        self.figure = new_figure(*FIGURE_INCHES)
        ax_tokens, ax_gap = self.figure.subplots(1, 2)
        self.bars = ax_tokens.bar(range(max(K_OPTIONS)), [0] * max(K_OPTIONS), color=OKABE_ITO[0])
        ax_tokens.set_xlim(-0.6, max(K_OPTIONS) - 0.4)
        ax_tokens.set_ylim(0, NUM_SEQUENCES * (MAX_LEN - 1) * 1.05)
        ax_tokens.set_xlabel("micro-batch")
        ax_tokens.set_ylabel("real tokens")
        ax_tokens.set_title("real tokens per micro-batch", fontsize=TITLE_PT)
        draw_spread_gap(ax_gap, sweep)
        ax_gap.set_xlim(-0.05, 1.05)
        ax_gap.set_ylim(1e-17, 1.0)
        ax_gap.set_title("gradient gap against the big batch", fontsize=TITLE_PT)
        (self.marker_bug,) = ax_gap.plot([], [], "X", ms=13, color=OKABE_ITO[5], label="now: per micro-batch")
        (self.marker_fix,) = ax_gap.plot([], [], "P", ms=13, color=OKABE_ITO[2], label="now: window")
        freeze_layout(apply_style(self.figure))  # then the Axes stay put for the cached backgrounds
        self.canvas = FastCanvas(self.figure, [*self.bars, self.marker_bug, self.marker_fix])
        self.image = Picture(format="png", layout=W.Layout(width=f"{round(FIGURE_INCHES[0] * DPI)}px"))
        self.result: dict = {}
        self.show(length_spread, accumulation_steps)
        for control in self.controls.values():
            control.observe(self._on_change, names="value")
        super().__init__([W.HBox([self.controls["length_spread"], self.controls["accumulation_steps"]]),
                          self.image, self.readout, self.errors])

    def _on_change(self, change: dict | None = None) -> None:
        with errors_shown_in(self.errors, "the token-spread widget"):
            self.show(self.controls["length_spread"].value, self.controls["accumulation_steps"].value)

    def show(self, length_spread: float, accumulation_steps: int) -> None:
        """Compute the setting, move the bars and markers, blit a frame, refresh the readout."""
        result = spread_readout(length_spread, accumulation_steps)
        for i, bar in enumerate(self.bars):
            bar.set_height(result["tokens"][i] if i < accumulation_steps else 0)
            bar.set_visible(i < accumulation_steps)
        self.marker_bug.set_data([length_spread], [max(result["per_micro_batch"]["grad_gap"], FLOOR)])
        self.marker_fix.set_data([length_spread], [max(result["window"]["grad_gap"], FLOOR)])
        self.image.value = self.canvas.png()
        self.result = dict(result, length_spread=length_spread, accumulation_steps=accumulation_steps)
        lines = spread_readout_lines(length_spread, accumulation_steps, result)
        self.readout.value = verdict_list_html(lines, ("allclose",))
        name_picture(self.image, "Real tokens per micro-batch and the gradient gap. " + "; ".join(lines))

    def _repr_mimebundle_(self, **kwargs):
        """The live widget where a kernel runs; a static PNG and the readout as text elsewhere."""
        r = self.result
        text = "TokenSpreadWidget: " + "; ".join(spread_readout_lines(r["length_spread"], r["accumulation_steps"], r))
        return with_static_fallback(super()._repr_mimebundle_(**kwargs), self.image.value, text)


def make_token_spread_widget(sweep: Mapping[str, Sequence[float]], length_spread: float = 0.5,
                             accumulation_steps: int = 4) -> TokenSpreadWidget:
    """Build (not display) the widget; `sweep`: `gap_against_spread`'s result, drawn behind the markers."""
    check_float("length_spread", length_spread, 0.0, 1.0, low_inclusive=True)
    if accumulation_steps not in K_OPTIONS:
        raise ValueError(f"accumulation_steps must be one of {K_OPTIONS} (it must divide the {NUM_SEQUENCES} "
                         f"sequences), got {accumulation_steps!r}")
    if not all(k in sweep for k in ("spread", *NORMALISERS)):
        raise ValueError(f"sweep must be the dict gap_against_spread returns, with keys 'spread' and {NORMALISERS}")
    return TokenSpreadWidget(length_spread, accumulation_steps, sweep)
