"""Drive the token-spread widget as a learner would: move the controls, read the readout, survive an error."""
import base64

import matplotlib

matplotlib.use("Agg")
import pytest  # noqa: E402

import widgets.lessons.researcher_1.controls as module  # noqa: E402
from widgets.core.training import one_thread  # noqa: E402
from widgets.lessons.researcher_1.controls import make_token_spread_widget  # noqa: E402


SWEEP = {"spread": [0.0, 1.0], "per_micro_batch": [1e-16, 0.1], "window": [1e-16, 1e-16]}


@pytest.fixture(scope="module")
def widget():
    with one_thread():  # a tiny model: one CPU thread runs it faster
        yield make_token_spread_widget(SWEEP, length_spread=0.5, accumulation_steps=4)


def test_starts_with_the_bug_false_and_the_fix_true(widget):
    text = widget.readout.value
    assert "per micro-batch mean / K" in text and text.count("allclose: False") == 1 and text.count("allclose: True") == 1


def test_spread_zero_makes_even_the_bug_exact(widget):
    before = widget.image.value
    widget.controls["length_spread"].value = 0.0
    assert widget.image.value != before
    assert widget.result["tokens"] == [96] * 4  # 4 full-length sequences of 24 labels each
    assert "allclose: False" not in widget.readout.value
    widget.controls["length_spread"].value = 0.5


def test_changing_k_moves_the_bars(widget):
    widget.controls["accumulation_steps"].value = 8
    visible = [bar for bar in widget.bars if bar.get_visible()]
    assert len(visible) == 8 and [b.get_height() for b in visible] == widget.result["tokens"]
    widget.controls["accumulation_steps"].value = 4


def test_error_in_a_callback_is_shown_and_the_widget_survives(widget, monkeypatch):
    def broken(*args, **kwargs):
        raise ValueError("length_spread is broken on purpose")
    monkeypatch.setattr(module, "spread_readout", broken)
    widget.controls["length_spread"].value = 0.75
    assert "length_spread is broken on purpose" in widget.errors.outputs[0]["text"]
    monkeypatch.undo()
    widget.controls["length_spread"].value = 0.25
    assert widget.errors.outputs == ()
    assert widget.result["length_spread"] == 0.25


def test_static_fallback_is_a_png_and_deterministic_text(widget):
    bundle = widget._repr_mimebundle_()
    data = bundle[0] if isinstance(bundle, tuple) else bundle
    assert base64.b64decode(data["image/png"]).startswith(b"\x89PNG")
    assert data["text/plain"].startswith("TokenSpreadWidget: length_spread = ")
    again = widget._repr_mimebundle_()
    assert (again[0] if isinstance(again, tuple) else again)["text/plain"] == data["text/plain"]


@pytest.mark.parametrize("kwargs, match", [
    (dict(length_spread=2.0), "length_spread"),
    (dict(accumulation_steps=3), "accumulation_steps"),
    (dict(sweep={"spread": [0.0]}), "sweep"),
])
def test_bad_starting_values_name_the_parameter(kwargs, match):
    with pytest.raises(ValueError, match=match):
        make_token_spread_widget(**{"sweep": SWEEP, **kwargs})

