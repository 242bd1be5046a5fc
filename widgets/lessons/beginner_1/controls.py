"""The bricks widget: choose bricks per trip and trips, then step (or play) through the trips.

The same pattern as the accumulation explorer: one plain matplotlib `Figure` made once, its
moving artists updated in place and blitted into an `Image` widget by `FastCanvas`; callback
errors are printed into an `Output` and the widget keeps working. A checkbox builds the wall
from the undivided pile (the forgot-to-divide bug): the update's push is then drawn K times
longer. The buttons carry their words ("next trip", "play the trips"), so a screen reader names
them (ipywidgets' Play is three icon buttons no Python code can name); playing steps the trip
slider from the kernel's event loop. Without a kernel (GitHub, nbviewer) the
widget shows a static PNG of the same wall about half-way (`midway`): a growing pile says more
than trip 0's empty landing.
"""
from __future__ import annotations

import asyncio
import html

import ipywidgets as W

from widgets.lessons.beginner_1.bricks import MAX_BRICKS_PER_TRIP, MAX_TRIPS, BricksState, describe, midway
from widgets.lessons.beginner_1.draw import FIGURE_INCHES, draw_bricks, update_bricks
from widgets.controls.compat import Displayed, set_tooltip
from widgets.controls.names import Picture, name_picture
from widgets.draw.frames import FastCanvas, errors_shown_in, with_static_fallback
from widgets.draw.style import DPI, PROJECTOR_DPI, new_figure
from widgets.core.config import check_int

PLAY_INTERVAL_MS = 900  # one trip per 0.9 s: slow enough to read the labels
_SLIDER = dict(continuous_update=True, style={"description_width": "250px"}, layout=W.Layout(width="520px"))
_BUTTON = dict(layout=W.Layout(width="150px"))


class BricksWidget(Displayed, W.VBox):
    """Use `make_bricks_widget`; `controls`, `next_trip`, `play`, `state`, `figure`, `readout`, `errors`
    are public. `play.value = True` plays the trips from the kernel (`next_trip` is one of them)."""

    def __init__(self, state: BricksState, dpi: int = DPI):
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
        self.next_trip = set_tooltip(W.Button(description="next trip", icon="step-forward", **_BUTTON),
                                     "Carry one more trip up the stairs")
        self.play = set_tooltip(W.ToggleButton(value=False, description="play the trips", icon="play", **_BUTTON),
                                "Play the trips one by one, from the first; press again to stop")
        self._playing: asyncio.Task | None = None  # the running play, held so that it is not garbage-collected
        self.controls["divided"] = W.Checkbox(
            value=not state.divided, description="forget to divide the pile by K (the classic bug)", indent=False,
        )
        self.readout = W.HTML()
        self.errors = W.Output()
        self.figure = new_figure(*FIGURE_INCHES, dpi=dpi, layout=None)
        self._ax = self.figure.add_axes((0, 0, 1, 1))
        self._artists = draw_bricks(state, self._ax)
        self.canvas = FastCanvas(self.figure, self._artists.moving)
        self.image = Picture(format="png", layout=W.Layout(width=f"{round(FIGURE_INCHES[0] * DPI)}px"))
        self._syncing = False
        self.show(state)
        for control in self.controls.values():
            control.observe(self._on_change, names="value")
        self.next_trip.on_click(lambda _: self.step())
        self.play.observe(self._on_play, names="value")
        c = self.controls
        sliders = [W.HBox([c["trip"], self.next_trip, self.play]), c["micro_batch_size"], c["accumulation_steps"],
                   c["divided"]]
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
                # The trip slider only goes up to K; lowering K pulls the trip down with it.
                trip = self.controls["trip"]
                trip.value = min(trip.value, K)
                trip.max = K
                self.show(self.current_state())
            finally:
                self._syncing = False

    def step(self) -> bool:
        """One more trip, if the wall is not built yet; returns whether the trip slider moved."""
        trip = self.controls["trip"]
        if trip.value >= trip.max:
            return False
        trip.value += 1
        return True

    def _on_play(self, change: dict) -> None:
        """Play from the first trip (or from here, part-way through) to the wall, one trip per
        `PLAY_INTERVAL_MS`, in the kernel's event loop; without one (a script, a test), at once."""
        if not change["new"]:
            return  # the loop below sees the button released and stops
        trip = self.controls["trip"]
        if trip.value >= trip.max:
            trip.value = 0
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            while self.play.value and self.step():
                pass
            self.play.value = False
            return
        self._playing = loop.create_task(self._play_trips())

    async def _play_trips(self) -> None:
        try:
            while self.play.value:
                await asyncio.sleep(PLAY_INTERVAL_MS / 1000)
                if not (self.play.value and self.step()):
                    break
        finally:
            self.play.value = False

    def show(self, state: BricksState) -> None:
        """Move the bricks and labels to `state`, blit a new frame, refresh the sentence below."""
        update_bricks(state, self._ax, self._artists)
        self.image.value = self.canvas.png()
        self.state = state
        self.readout.value = f"<p style='margin:0.3em 0'>{html.escape(describe(state))}</p>"
        name_picture(self.image, f"The bricks: {describe(state)}")

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
    micro_batch_size: int = 5, accumulation_steps: int = 4, trip: int = 0, divided: bool = True, dpi: int = DPI
) -> BricksWidget:
    """Build (not display) the bricks widget; `divided=False` starts with the forgot-to-divide box
    ticked; `dpi` from 100 to 200 (the projector view's, sharp when enlarged). Bad values raise a
    ValueError (TypeError) naming the parameter and its range."""
    state = BricksState(micro_batch_size, accumulation_steps, trip, divided)
    return BricksWidget(state, check_int("dpi", dpi, DPI, PROJECTOR_DPI))
