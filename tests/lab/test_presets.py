"""Presets and share codes: every preset shows what it says, every code round-trips, and a bad or
stale code is refused with a message saying which."""
import itertools

import pytest

from widgets.core.config import AccumulationConfig
from widgets.core.training import run_regimes
from widgets.lab.presets import (
    MISTAKE_ORDER,
    DEFAULTS,
    PRESETS,
    StateCodeError,
    check_state,
    decode_state,
    encode_state,
    preset,
)


@pytest.mark.parametrize("name", PRESETS)
def test_preset_gives_the_verdict_it_promises(name):
    """Oracle: the three regimes trained at the preset's settings; their verdict is the preset's."""
    kwargs = preset(name)
    record = run_regimes(AccumulationConfig(**kwargs))
    assert record.allclose is PRESETS[name].allclose, (name, record.max_grad_diff)
    assert all(update is None for update in record.diverged_at.values())
    assert decode_state(encode_state(kwargs)) == kwargs


def test_presets_match_the_explorer_and_build_it():
    inspect = pytest.importorskip("inspect")
    explorer = pytest.importorskip("widgets.lessons.beginner_2.controls")
    from widgets.lab import presets

    parameters = inspect.signature(explorer.make_accumulation_explorer).parameters
    settings = {k: p.default for k, p in parameters.items() if k not in ("preset", "state", "readout", "dpi")}  # not settings (dpi: the picture)
    assert settings == DEFAULTS
    assert presets.DEFAULTS is DEFAULTS
    built = explorer.make_accumulation_explorer(**decode_state(encode_state(preset("forgot-to-divide"))))
    assert built.controls["mistake"].value == "loss_not_divided" and not built.record.allclose


def test_unknown_preset_lists_the_known_ones():
    with pytest.raises(ValueError, match="forgot-to-divide"):
        preset("forget-to-divide")


@pytest.mark.parametrize("kwargs", [
    {},
    {"accumulation_steps": 16, "micro_batch_size": 64},
    {"accumulation_steps": 1, "micro_batch_size": 1, "learning_rate": 0.001},
    {"learning_rate": 10.0, "seed": 2**31 - 1, "num_updates": 1000, "warmup_updates": 1000},
    {"learning_rate": 0.0123, "max_grad_norm": 0.05, "tail_micro_batches": 3},
    *({"mistake": name, "tail_micro_batches": 1, "max_grad_norm": 2.0, "warmup_updates": 2} for name in MISTAKE_ORDER),
    {"optimizer": "adamw", "accumulation_steps": 2},
])
def test_codes_round_trip(kwargs):
    code = encode_state(kwargs)
    assert decode_state(code) == check_state(kwargs)
    # forgiving to retype: case, dashes, spaces, O for 0 and l for 1
    sloppy = code.lower().replace("-", " ").replace("0", "o").replace("1", "l")
    assert decode_state(sloppy) == check_state(kwargs)


def test_the_defaults_every_code_is_read_against_stay_as_they_were():
    """A code stores the settings that differ from DEFAULTS (the config's own defaults): a changed
    default would silently change the picture of every code already shared."""
    assert DEFAULTS == {"accumulation_steps": 4, "micro_batch_size": 8, "learning_rate": 0.1, "mistake": None, "num_updates": 8,
                        "seed": 0, "tail_micro_batches": 0, "max_grad_norm": None, "warmup_updates": 0, "optimizer": "sgd"}


def test_codes_are_short_for_the_classroom_demos():
    assert max(len(encode_state(preset(name))) for name in PRESETS) <= 14
    assert encode_state({}) == encode_state(DEFAULTS)


def test_learning_rate_is_kept_to_three_significant_digits():
    assert decode_state(encode_state({"learning_rate": 0.123456}))["learning_rate"] == 0.123
    assert decode_state(encode_state({"learning_rate": 0.09999}))["learning_rate"] == 0.1


def test_every_single_character_typo_is_caught_or_harmless():
    """A changed character either fails the check or (1 in 1024) decodes to a valid state."""
    code = encode_state(preset("clip-every-micro-step"))
    caught = 0
    for i, ch in itertools.product(range(4, len(code)), "0123456789ABCDEFGHJKMNPQRSTVWXYZ"):
        if code[i] in "-" or code[i] == ch:
            continue
        try:
            decode_state(code[:i] + ch + code[i + 1:])
        except StateCodeError:
            caught += 1
    assert caught >= 0.99 * (len(code.replace("-", "")) - 3) * 31


@pytest.mark.parametrize("code, message", [
    ("", "not an explorer share code"),
    ("hello", "not an explorer share code"),
    ("GA1-2002-NZ", "another version of the lab"),  # a code from before one mistake at a time
    ("GA3-00F4", "another version of the lab"),
    ("GA2-00F5", "mistyped or cut short"),
    ("GA2-2004", "mistyped or cut short"),
    ("GA2-20", "too short"),
    ("GA2-20U4-WA", r"holds \['U'\]"),
])
def test_bad_codes_say_what_is_wrong(code, message):
    with pytest.raises(StateCodeError, match=message):
        decode_state(code)


def test_a_huge_paste_is_refused_in_a_short_message():
    """A 10 MB paste (a whole notebook, a log) is refused at once, quoting 20 characters of it, not 10 MB."""
    for code in ("GA2-" + "0" * 10**7, "x" * 10**7, "GA2-" + "0" * 97):
        with pytest.raises(StateCodeError, match=f"at most 100 characters.*got {len(code):,} starting") as caught:
            decode_state(code)
        assert len(str(caught.value)) < 200
    code = encode_state(preset("uneven-tail"))
    assert decode_state("\n" + code + " " * 200 + "\n") == preset("uneven-tail")  # whitespace around a paste is fine


def test_a_code_this_explorer_cannot_show_is_called_stale():
    """A well-formed code whose settings are out of today's ranges: e.g. a learning-rate index past
    10.0, or a tail as long as K (what an older explorer might have allowed)."""
    from widgets.lab import presets

    def forge(bits: str) -> str:
        bits += "0" * (-len(bits) % 5)
        body = "".join(presets._ALPHABET[int(bits[i:i + 5], 2)] for i in range(0, len(bits), 5))
        return "GA2-" + body + presets._check_chars("GA2" + body)

    lr_past_the_top = "0010000000" + format(4000, "012b")
    with pytest.raises(StateCodeError, match="learning rate"):
        decode_state(forge(lr_past_the_top))
    tail_as_long_as_k = "0000001000" + format(4, "04b")
    with pytest.raises(StateCodeError, match="tail_micro_batches.*stale code"):
        decode_state(forge(tail_as_long_as_k))
    with pytest.raises(StateCodeError, match="more in it"):
        decode_state(forge("0000000000" + "1" * 11))


@pytest.mark.parametrize("kwargs, error, message", [
    ({"accumulation_steps": 17}, ValueError, "accumulation_steps must be a whole number from 1 to 16"),
    ({"learning_rate": 0}, ValueError, "learning_rate"),
    ({"max_grad_norm": 0.3}, ValueError, "max_grad_norm must be None or one of"),
    ({"mistake": "forget_final_step"}, ValueError, "needs a short last window"),
    ({"mistake": "no_such_mistake"}, ValueError, "unknown name"),
    ({"mistake": ("loss_not_divided",)}, TypeError, "one mistake's name"),
    ({"K": 4}, ValueError, "unknown explorer setting"),
    ({"optimizer": "adam"}, ValueError, "optimizer must be one of"),
    ("K=4", TypeError, "dict"),
])
def test_encoding_refuses_what_the_explorer_refuses(kwargs, error, message):
    with pytest.raises(error, match=message):
        encode_state(kwargs)
    with pytest.raises(StateCodeError, match="share code is a string"):
        decode_state(4)


def test_projector_settings_read_the_address_then_the_environment():
    from widgets.lab.presets import projector_settings

    assert projector_settings("", {}) == (check_state({}), projector_settings("", {})[1])
    assert projector_settings("preset=forgot-to-divide", {})[0]["mistake"] == "loss_not_divided"
    code = encode_state(preset("uneven-tail"))
    assert projector_settings(f"state={code}", {"LAB_PRESET": "forgot-to-divide"})[0] == preset("uneven-tail")
    assert projector_settings("", {"LAB_STATE": code})[0] == preset("uneven-tail")
    kwargs, caption = projector_settings("state=GA2-2004-WB", {})
    assert kwargs == check_state({}) and "mistyped or cut short" in caption
    assert "no preset named 'nope'" in projector_settings("preset=nope", {})[1]
