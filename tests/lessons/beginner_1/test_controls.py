"""The bricks widget, driven from Python: it follows its controls, blits, and survives errors."""
import base64
import sys

import pytest

import widgets.lessons.beginner_1.controls as bricks_explorer
from widgets.lessons.beginner_1.bricks import MAX_BRICKS_PER_TRIP, MAX_TRIPS, BricksState
from widgets.lessons.beginner_1.controls import BricksWidget, make_bricks_widget
from widgets.draw.stills import img_html, quantized


def _png(widget) -> bytes:
    return bytes(widget.image.value)


def _drawn_as(widget, state: BricksState) -> bool:
    """The widget's picture is the one a widget built at `state` shows, and its words say that state."""
    fresh = make_bricks_widget(state.micro_batch_size, state.accumulation_steps, state.trip, state.divided)
    return _png(widget) == _png(fresh) and widget.readout.value == fresh.readout.value


def test_builder_returns_the_widget_with_its_starting_picture():
    widget = make_bricks_widget(micro_batch_size=5, accumulation_steps=4)
    assert isinstance(widget, BricksWidget)
    assert widget.state == BricksState(5, 4, 0)
    assert _png(widget).startswith(b"\x89PNG")
    assert "all 20 bricks are downstairs" in widget.readout.value
    assert "pyplot" not in repr(type(widget.figure))  # a plain Figure, nothing left open in pyplot
    assert "matplotlib.pyplot" not in sys.modules or not sys.modules["matplotlib.pyplot"].get_fignums()


def test_trip_slider_grows_the_pile_and_only_the_last_trip_builds_the_wall():
    widget = make_bricks_widget(micro_batch_size=3, accumulation_steps=4)
    images = {bytes(widget.image.value)}
    for t in range(1, 4):
        widget.controls["trip"].value = t
        assert _drawn_as(widget, BricksState(3, 4, t))
        assert f"the pile at the top holds {t} x 3 = {3 * t} bricks" in widget.readout.value
        assert "No wall yet" in widget.readout.value
        images.add(bytes(widget.image.value))
    widget.controls["trip"].value = 4
    assert _drawn_as(widget, BricksState(3, 4, 4))
    assert "ONE wall is built from all 12 bricks" in widget.readout.value
    images.add(bytes(widget.image.value))
    assert len(images) == 5  # every trip drew a different picture
    assert widget.errors.outputs == ()


def test_changing_b_and_k_redraws_and_keeps_the_trip_in_range():
    widget = make_bricks_widget(micro_batch_size=2, accumulation_steps=6, trip=5)
    widget.controls["micro_batch_size"].value = 4
    assert widget.state == BricksState(4, 6, 5) and _drawn_as(widget, BricksState(4, 6, 5))
    widget.controls["accumulation_steps"].value = 3  # fewer trips than already done
    assert widget.state == BricksState(4, 3, 3) and _drawn_as(widget, BricksState(4, 3, 3))
    assert widget.controls["trip"].max == 3
    widget.controls["accumulation_steps"].value = 8
    assert widget.controls["trip"].max == 8
    assert widget.state == BricksState(4, 8, 3)


def test_next_trip_and_play_step_the_trips_and_stop_at_the_wall():
    widget = make_bricks_widget(micro_batch_size=2, accumulation_steps=3)
    widget.next_trip.click()
    assert widget.state.trip == 1
    widget.play.value = True  # no event loop here: plays straight to the wall, then releases the button
    assert widget.state.trip == 3 and widget.state.wall_built and widget.play.value is False
    assert widget.step() is False  # nothing left to carry
    widget.play.value = True  # played again from the wall: starts from the first trip
    assert widget.state.trip == 3 and widget.play.value is False


def test_every_button_and_the_picture_have_a_name():
    widget = make_bricks_widget(micro_batch_size=2, accumulation_steps=3, trip=3, divided=False)
    assert widget.next_trip.description and widget.next_trip.tooltip
    assert widget.play.description and widget.play.tooltip
    assert widget.image.tooltip.startswith("The bricks: ") and "3" in widget.image.tooltip


def test_redraws_blit_without_redrawing_the_whole_figure():
    widget = make_bricks_widget()
    for b in range(1, MAX_BRICKS_PER_TRIP + 1):
        widget.controls["micro_batch_size"].value = b
        widget.controls["trip"].value = b % (widget.state.accumulation_steps + 1)
    assert widget.canvas.full_redraws == 1  # fixed limits: only the moving artists are drawn again


def test_the_box_ticked_before_the_wall_stands_keeps_the_frame_and_after_it_redraws(monkeypatch):
    widget = make_bricks_widget(micro_batch_size=2, accumulation_steps=4, trip=1)
    drawn = []
    monkeypatch.setattr(widget.canvas, "png", lambda png=widget.canvas.png: drawn.append(1) or png())
    widget.controls["divided"].value = True  # forget to divide, before the wall: nothing on the picture moves
    assert drawn == [] and _drawn_as(widget, BricksState(2, 4, 1, divided=False))
    widget.controls["trip"].value = 4  # the wall stands: its push is K times too strong
    assert drawn == [1] and _drawn_as(widget, BricksState(2, 4, 4, divided=False))
    widget.controls["divided"].value = False
    assert drawn == [1, 1] and _drawn_as(widget, BricksState(2, 4, 4))


def test_a_callback_error_is_shown_and_the_widget_keeps_working(monkeypatch):
    widget = make_bricks_widget(micro_batch_size=2, accumulation_steps=4)

    def broken(*args, **kwargs):
        raise RuntimeError("injected failure")

    monkeypatch.setattr(bricks_explorer, "update_bricks", broken)
    widget.controls["trip"].value = 1  # must not raise
    assert "injected failure" in widget.errors.outputs[0]["text"]
    monkeypatch.undo()
    widget.controls["trip"].value = 2
    assert widget.errors.outputs == ()
    assert widget.state == BricksState(2, 4, 2) and _drawn_as(widget, BricksState(2, 4, 2))


@pytest.mark.parametrize(
    "kwargs, error, word",
    [
        (dict(micro_batch_size=0), ValueError, "micro_batch_size must be a whole number from 1 to 8"),
        (dict(micro_batch_size=MAX_BRICKS_PER_TRIP + 1), ValueError, "micro_batch_size"),
        (dict(accumulation_steps=MAX_TRIPS + 1), ValueError, "accumulation_steps must be a whole number from 1 to 8"),
        (dict(accumulation_steps=2, trip=3), ValueError, "trip must be a whole number from 0 to 2"),
        (dict(micro_batch_size="five"), TypeError, "micro_batch_size"),
    ],
)
def test_bad_starting_values_name_the_parameter(kwargs, error, word):
    with pytest.raises(error, match=word):
        make_bricks_widget(**kwargs)


def test_the_bug_box_builds_the_wall_from_the_undivided_pile():
    widget = make_bricks_widget(micro_batch_size=5, accumulation_steps=4, trip=4)
    right = _png(widget)
    assert "the pile ÷ 4" in widget.readout.value
    widget.controls["divided"].value = True  # ticked: "forget to divide"
    assert widget.state == BricksState(5, 4, 4, divided=False)
    assert "4 times too strong" in widget.readout.value and "4 times too strong" in widget.image.tooltip
    assert _png(widget) != right and _drawn_as(widget, BricksState(5, 4, 4, divided=False))
    widget.controls["trip"].value = 2  # before the wall, nothing is built from the pile yet
    assert _drawn_as(widget, BricksState(5, 4, 2, divided=False))
    assert make_bricks_widget(divided=False).controls["divided"].value is True


def test_static_fallback_is_the_midway_frame_and_leaves_the_live_picture_alone():
    widget = make_bricks_widget(micro_batch_size=5, accumulation_steps=4)  # live at trip 0
    live = _png(widget)
    bundle = widget._repr_mimebundle_()
    data = bundle[0] if isinstance(bundle, tuple) else bundle
    midway_frame = make_bricks_widget(micro_batch_size=5, accumulation_steps=4, trip=2)
    # trip 2: a pile, no wall (saved with a palette: `quantized`)
    assert base64.b64decode(data["image/png"]) == quantized(_png(midway_frame))
    assert data["text/html"] == img_html(quantized(_png(midway_frame)), data["text/plain"])
    assert _png(widget) == live
    assert data["text/plain"].startswith("BricksWidget: Trip 0 of 4")  # the live state, for nbval


def test_static_fallback_is_a_png_and_deterministic_text():
    a, b = make_bricks_widget(3, 2, trip=1), make_bricks_widget(3, 2, trip=1)
    bundle_a, bundle_b = a._repr_mimebundle_(), b._repr_mimebundle_()
    data_a = bundle_a[0] if isinstance(bundle_a, tuple) else bundle_a
    data_b = bundle_b[0] if isinstance(bundle_b, tuple) else bundle_b
    assert base64.b64decode(data_a["image/png"]).startswith(b"\x89PNG")
    assert data_a["text/plain"] == data_b["text/plain"]
    assert data_a["text/plain"].startswith("BricksWidget: Trip 1 of 2")


def test_the_projector_view_gets_twice_the_pixels_of_the_same_picture():
    from PIL import Image
    import io

    sizes = [Image.open(io.BytesIO(bytes(make_bricks_widget(dpi=dpi).image.value))).size for dpi in (100, 200)]
    assert sizes[1] == (2 * sizes[0][0], 2 * sizes[0][1]) and sizes[0][0] <= 860  # the notebook's column
    with pytest.raises(ValueError, match="dpi"):
        make_bricks_widget(dpi=1000)
