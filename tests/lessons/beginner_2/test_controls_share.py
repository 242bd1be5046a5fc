"""Presets and share codes in the explorer: a room sees one setting; a bad code says what is wrong."""
import pytest

from widgets.lessons.beginner_2.controls import make_accumulation_explorer
from widgets.lab.presets import PRESETS, StateCodeError


@pytest.fixture(scope="module")
def moved():
    """An explorer moved away from its defaults, the way a teacher would before sharing."""
    explorer = make_accumulation_explorer()
    explorer.controls["accumulation_steps"].value = 8
    explorer.controls["micro_batch_size"].value = 2
    explorer.controls["optimizer"].value = "adamw"
    explorer.controls["mistake"].value = "loss_not_divided"
    return explorer


def test_a_share_code_rebuilds_the_same_settings(moved):
    code = moved.share_code()
    assert code.startswith("GA2-")
    again = make_accumulation_explorer(state=code)
    assert again.current_config() == moved.current_config()
    assert again.record.eval_loss == moved.record.eval_loss


def test_the_button_shows_the_code_to_paste(moved):
    moved.share.click()
    assert moved.share_code() in moved.share_text.value and "state=" in moved.share_text.value


def test_a_readout_is_kept_when_a_code_or_a_preset_rebuilds_the_explorer():
    assert make_accumulation_explorer(preset="forgot-to-divide", readout="detailed").readout_kind == "detailed"
    assert make_accumulation_explorer(preset="forgot-to-divide").readout_kind == "plain"


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_every_preset_builds_with_its_verdict(name):
    explorer = make_accumulation_explorer(preset=name)
    assert explorer.record.matches_big_batch == PRESETS[name].allclose, name


@pytest.mark.parametrize("kwargs, words", [
    (dict(state="GA2-XXXX-XX"), "mistyped or cut short"),
    (dict(state="GA9-2002-NZ"), "another version"),
    (dict(state="hello"), "not an explorer share code"),
    (dict(preset="no-such-demo"), "no preset named"),
    (dict(preset="healthy", state="GA2-2021-9"), "not both"),
    (dict(state="GA1-2002-NZ"), "another version"),  # a code from before one mistake at a time
])
def test_bad_codes_and_names_say_what_is_wrong(kwargs, words):
    with pytest.raises(ValueError, match=words):
        make_accumulation_explorer(**kwargs)


def test_a_stale_code_is_a_state_code_error():
    assert issubclass(StateCodeError, ValueError)
