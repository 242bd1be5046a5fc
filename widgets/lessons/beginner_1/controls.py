"""The bricks widget: choose bricks per trip and trips, then step (or play) through the trips; the buttons carry
their words, so a screen reader names them (ipywidgets' Play is icons only)."""
from __future__ import annotations

import asyncio
import html

import ipywidgets as W

from widgets.lessons.beginner_1.bricks import MAX_BRICKS_PER_TRIP, MAX_TRIPS, BricksState, describe, midway
from widgets.lessons.beginner_1.draw import FIGURE_INCHES, as_drawn, draw_bricks, update_bricks
from widgets.controls.compat import Displayed, Picture, name_picture, set_tooltip
from widgets.draw.style import DPI, FastCanvas, errors_shown_in, new_figure, with_static_fallback

PLAY_INTERVAL_MS = 900  # one trip per 0.9 s: slow enough to read the labels
_SLIDER = dict(continuous_update=True, style={"description_width": "250px"}, layout=W.Layout(width="520px"))
_BUTTON = dict(layout=W.Layout(width="150px"))


class BricksWidget(Displayed, W.VBox):
    """Use `make_bricks_widget`; `play.value = True` plays the trips from the kernel."""

    def __init__(self, state: BricksState, dpi: int = DPI):
        self.figure = new_figure(*FIGURE_INCHES, dpi=dpi, layout=None)  # checks dpi before any widget is made
        self.state = state
        sliders = {"micro_batch_size": (1, MAX_BRICKS_PER_TRIP, "bricks per trip (micro_batch_size b)"),
                   "accumulation_steps": (1, MAX_TRIPS, "trips (accumulation_steps K)"),
                   "trip": (0, state.accumulation_steps, "trips done (micro_steps so far)")}
        self.controls = {name: W.IntSlider(value=getattr(state, name), min=low, max=high, description=words, **_SLIDER)
                         for name, (low, high, words) in sliders.items()}
        self.next_trip = set_tooltip(W.Button(description="next trip", icon="step-forward", **_BUTTON),
                                     "Carry one more trip up the stairs")
        self.play = set_tooltip(W.ToggleButton(value=False, description="play the trips", icon="play", **_BUTTON),
                                "Play the trips one by one, from the first; press again to stop")
        self._playing: asyncio.Task | None = None  # the running play, held so that it is not garbage-collected
        self.controls["divided"] = W.Checkbox(
            value=not state.divided, description="forget to divide by K", indent=False,
        )
        self.readout = W.HTML()
        self.errors = W.Output()
        self._artists = draw_bricks(state, self.figure.add_axes((0, 0, 1, 1)))
        self.canvas = FastCanvas(self.figure, self._artists.moving)
        self.image = Picture(format="png", layout=W.Layout(width=f"{round(FIGURE_INCHES[0] * DPI)}px"))
        self._syncing = False
        self.show(state)
        for control in self.controls.values():
            control.observe(self._on_change, names="value")
        self.next_trip.on_click(lambda _: self.step())
        self.play.observe(self._on_play, names="value")
        c = self.controls
        rows = [W.HBox([c["trip"], self.next_trip, self.play]), c["micro_batch_size"], c["accumulation_steps"],
                c["divided"]]
        super().__init__([*rows, self.image, self.readout, self.errors])

    def _on_change(self, change: dict | None = None) -> None:
        if self._syncing:
            return
        with errors_shown_in(self.errors, "the bricks"):
            self._syncing = True
            try:
                c = self.controls
                K = c["accumulation_steps"].value
                # The trip slider only goes up to K; lowering K pulls the trip down with it.
                c["trip"].value = min(c["trip"].value, K)
                c["trip"].max = K
                self.show(BricksState(c["micro_batch_size"].value, K, c["trip"].value, divided=not c["divided"].value))
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
        """Play to the wall, one trip per `PLAY_INTERVAL_MS` in the kernel's event loop; without one, at once."""
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
        words = describe(state)
        with self.image.hold_sync():  # the frame and its name reach the page in one message
            # A box ticked before the wall stands changes no pixel: the frame on show stays, not drawn again.
            if not self.image.value or as_drawn(state) != as_drawn(self.state):
                update_bricks(state, self._artists)
                self.image.value = self.canvas.png()
            name_picture(self.image, f"The bricks: {words}")
        self.state = state
        self.readout.value = f"<p style='margin:0.3em 0'>{html.escape(words)}</p>"

    def static_png(self) -> bytes:
        """This wall half-way (`midway`), drawn with the live artists and then put back."""
        frame = midway(self.state)
        if frame == self.state:
            return bytes(self.image.value)
        try:
            update_bricks(frame, self._artists)
            return self.canvas.png()
        finally:
            update_bricks(self.state, self._artists)

    def _repr_mimebundle_(self, **kwargs):
        text = f"BricksWidget: {describe(self.state)}"
        return with_static_fallback(super()._repr_mimebundle_(**kwargs), self.static_png(), text)


def make_bricks_widget(
    micro_batch_size: int = 5, accumulation_steps: int = 4, trip: int = 0, divided: bool = True, dpi: int = DPI
) -> BricksWidget:
    """Build (not display) the bricks widget; `divided=False` ticks the forgot-to-divide box; `dpi` 200 for the projector."""
    state = BricksState(micro_batch_size, accumulation_steps, trip, divided)
    return BricksWidget(state, dpi)
