"""The bricks widget: choose bricks per trip and trips, then step (or Play) through the trips.

The same pattern as the accumulation explorer: one plain matplotlib `Figure` made once, its
moving artists updated in place and blitted into an `Image` widget by `FastCanvas`; callback
errors are printed into an `Output` and the widget keeps working. A checkbox builds the wall
from the undivided pile (the forgot-to-divide bug). Without a kernel (GitHub, nbviewer) the
widget shows a static PNG of the same wall about half-way (`midway`): a growing pile says more
than trip 0's empty landing.
"""
from __future__ import annotations

import html

import ipywidgets as W
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from widgets.lessons.beginner_1.bricks import MAX_BRICKS_PER_TRIP, MAX_TRIPS, BricksState, describe, midway
from widgets.lessons.beginner_1.draw import draw_bricks, update_bricks
from widgets.controls.compat import Displayed, set_tooltip
from widgets.draw.frames import FastCanvas, errors_shown_in, with_static_fallback

PLAY_INTERVAL_MS = 900  # one trip per 0.9 s: slow enough to read the labels
_SLIDER = dict(continuous_update=True, style={"description_width": "250px"}, layout=W.Layout(width="520px"))


class BricksWidget(Displayed, W.VBox):
    """Use `make_bricks_widget`; `controls`, `play`, `state`, `figure`, `readout`, `errors` are public."""

    def __init__(self, state: BricksState):
        self.state = state
        self.controls = {
            "micro_batch_size": W.IntSlider(
                value=state.micro_batch_size, min=1, max=MAX_BRICKS_PER_TRIP,
                description="bricks per trip (micro_batch_size b)", **_SLIDER,
            ),
            "accumulation_steps": W.IntSlider(
                value=state.accumulation_steps, min=1, max=MAX_TRIPS,
                description="trips (accumulation_steps K)", **_SLIDER,
            ),
            "trip": W.IntSlider(
                value=state.trip, min=0, max=state.accumulation_steps,
                description="trips done (micro_steps so far)", **_SLIDER,
            ),
        }
        self.play = set_tooltip(W.Play(
            value=state.trip, min=0, max=state.accumulation_steps, step=1, interval=PLAY_INTERVAL_MS,
            description="Play the trips",
        ), "Play the trips")
        self.controls["divided"] = W.Checkbox(
            value=not state.divided, description="forget to divide the pile by K (the classic bug)", indent=False,
        )
        W.jslink((self.play, "value"), (self.controls["trip"], "value"))  # in the browser, no kernel round trip
        self.readout = W.HTML()
        self.errors = W.Output()
        self.figure = Figure(figsize=(9.6, 4.35), dpi=72)
        FigureCanvasAgg(self.figure)
        self._ax = self.figure.add_axes((0, 0, 1, 1))
        self._artists = draw_bricks(state, self._ax)
        self.canvas = FastCanvas(self.figure, self._artists.moving)
        self.image = W.Image(format="png", layout=W.Layout(width="690px"))
        self._syncing = False
        self.show(state)
        for control in self.controls.values():
            control.observe(self._on_change, names="value")
        c = self.controls
        sliders = [W.HBox([self.play, c["trip"]]), c["micro_batch_size"], c["accumulation_steps"], c["divided"]]
        super().__init__([*sliders, self.image, self.readout, self.errors])

    def current_state(self) -> BricksState:
        """The state the controls describe now (a ValueError names the control if one is out of range)."""
        c = self.controls
        return BricksState(c["micro_batch_size"].value, c["accumulation_steps"].value, c["trip"].value,
                           divided=not c["divided"].value)

    def _on_change(self, change: dict | None = None) -> None:
        """Follow the controls; an error is shown under the picture and the widget stays live."""
        if self._syncing:
            return
        with errors_shown_in(self.errors, "the bricks"):
            self._syncing = True
            try:
                K = self.controls["accumulation_steps"].value
                # The trip slider (and Play) only go up to K; lowering K pulls the trip down with it.
                for control in (self.controls["trip"], self.play):
                    control.value = min(control.value, K)
                    control.max = K
                self.show(self.current_state())
            finally:
                self._syncing = False

    def show(self, state: BricksState) -> None:
        """Move the bricks and labels to `state`, blit a new frame, refresh the sentence below."""
        update_bricks(state, self._ax, self._artists)
        self.image.value = self.canvas.png()
        self.state = state
        self.readout.value = f"<p style='margin:0.3em 0'>{html.escape(describe(state))}</p>"

    def static_png(self) -> bytes:
        """The picture for readers without a kernel: this wall about half-way (`midway`), drawn
        with the same artists and put back, so the live picture is left as it was."""
        frame = midway(self.state)
        if frame == self.state:
            return bytes(self.image.value)
        try:
            update_bricks(frame, self._ax, self._artists)
            return self.canvas.png()
        finally:
            update_bricks(self.state, self._ax, self._artists)

    def _repr_mimebundle_(self, **kwargs):
        """The live widget where a kernel runs; a half-way PNG and the sentence elsewhere."""
        text = f"BricksWidget: {describe(self.state)}"
        return with_static_fallback(super()._repr_mimebundle_(**kwargs), self.static_png(), text)


def make_bricks_widget(
    micro_batch_size: int = 5, accumulation_steps: int = 4, trip: int = 0, divided: bool = True
) -> BricksWidget:
    """Build (not display) the bricks widget; `divided=False` starts with the forgot-to-divide box
    ticked. Bad values raise a ValueError (TypeError) naming the parameter and its range."""
    return BricksWidget(BricksState(micro_batch_size, accumulation_steps, trip, divided))
