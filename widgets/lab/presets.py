"""Named explorer settings for the classic demos, and short codes that carry any setting.

    PRESETS["forgot-to-divide"].kwargs   # -> make_accumulation_explorer(**kwargs)
    code = encode_state(kwargs)          # e.g. 'GA2-2021-9': paste it into the chat
    decode_state(code)                   # -> the same kwargs, checked; a bad or stale code says why

A code is the version (`GA2`), the settings that differ from the explorer's defaults packed into
bits (a map of which settings follow, one bit per setting, then each one in a fixed width), and two check
characters (CRC-32 of the rest, 10 bits), in Crockford's base 32: no I, L, O or U, so a code read
aloud or retyped is forgiving (`o` reads as 0, `l` as 1; dashes, spaces and case are ignored),
and a typo is caught by the check characters rather than silently showing another picture.
Pure Python: the explorer reads these; nothing here imports torch, matplotlib or ipywidgets.
"""
from __future__ import annotations

import math
import os
import zlib
from dataclasses import dataclass, field
from typing import NamedTuple

from widgets.core.config import OPTIMIZER_NAMES, AccumulationConfig, check_float, check_int
from widgets.core.mistakes import MISTAKES, check_mistake
from widgets.core.shared import B_RANGE, CLIP_OPTIONS, K_RANGE, LR_RANGE  # the explorer's ranges and options

VERSION = "2"  # 2: one mistake at a time (1 carried a set of bug switches)
PREFIX = f"GA{VERSION}"
# A mistake is 0 for none or 1 + its index in MISTAKE_ORDER, an optimizer its index in OPTIMIZER_NAMES,
# a clip its index in CLIP_OPTIONS: a new one is appended to each (same version).
MISTAKE_ORDER = tuple(MISTAKES)
WIDTHS = {  # bits per setting, in code order
    "accumulation_steps": 4, "micro_batch_size": 6, "learning_rate": 12, "mistake": 4,
    "num_updates": 10, "seed": 31, "tail_micro_batches": 4, "max_grad_norm": 3, "warmup_updates": 10, "optimizer": 2,
}
# make_accumulation_explorer's defaults: the config's own. A code stores what differs from these, so
# changing one changes what every code means.
DEFAULTS: dict[str, object] = {name: getattr(AccumulationConfig(), name) for name in WIDTHS}
_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"  # Crockford's base 32
_READS_AS = {"O": "0", "I": "1", "L": "1"}


MAX_CODE_CHARS = 100  # the longest code is 32 characters; room for spaces and dashes typed in between


class StateCodeError(ValueError):
    """A share code that cannot be read (mistyped, cut short) or that this version cannot show."""


@dataclass(frozen=True)
class Preset:
    """A classic demo: the explorer's keyword arguments and what the picture shows."""

    kwargs: dict = field(default_factory=dict)
    shows: str = ""
    allclose: bool = True  # the verdict the readout gives (tests/lab/test_presets.py runs each one)

    def explorer_kwargs(self) -> dict:
        """Every keyword of `make_accumulation_explorer`, defaults filled in."""
        return {**DEFAULTS, **self.kwargs}


PRESETS: dict[str, Preset] = {
    "healthy": Preset({}, "K = 4 micro-batches of 8: the accumulated gradient is the big-batch gradient"),
    "twos-impersonate-sixteen": Preset(
        {"accumulation_steps": 8, "micro_batch_size": 2},
        "8 micro-batches of 2 train exactly like one batch of 16 (memory of 2, time of 8 passes)"),
    "forgot-to-divide": Preset(
        {"mistake": "loss_not_divided"}, "the pile grows K times too tall: the step is K times too big", False),
    "divided-twice": Preset(
        {"mistake": "loss_divided_twice"}, "the pile is K times too short: training crawls", False),
    "zero-grad-every-micro-step": Preset(
        {"mistake": "zero_grad_every_micro_step"}, "only the last micro-batch survives: the pile never builds", False),
    "step-every-micro-step": Preset(
        {"mistake": "step_every_micro_step"}, "K small updates instead of one: not the big-batch run", False),
    "uneven-tail": Preset(
        {"tail_micro_batches": 2}, "a last window of 2 micro-batches, weighted by its own size: still exact"),
    "uneven-tail-forgotten": Preset(
        {"tail_micro_batches": 2, "mistake": "forget_final_step"},
        "the last, shorter window never gets its optimizer step", False),
    "tail-divided-by-k": Preset(
        {"tail_micro_batches": 2, "mistake": "tail_divided_by_k"},
        "the last window of 2 is divided by K = 4: its update is half as big as it should be", False),
    "clip-every-micro-step": Preset(
        {"max_grad_norm": 0.5, "mistake": "clip_every_micro_step"},
        "clipping the half-built pile after each micro-step: the sum of clipped parts is not the clipped sum", False),
    "warmup-every-micro-step": Preset(
        {"warmup_updates": 4, "mistake": "scheduler_every_micro_step"},
        "the warmup is stepped K times per update: it ends K times too early", False),
    "logged-divided-loss": Preset(
        {"mistake": "log_divided_loss"},
        "the logged loss is K times too small, the gradients are right: a logging bug only"),
}


def check_state(kwargs: dict) -> dict:
    """`kwargs` for `make_accumulation_explorer`, checked and complete (defaults filled in).

    Raises ValueError (or TypeError) naming the setting and its allowed values."""
    return _checked(kwargs)[0]


def explorer_config(kwargs: dict) -> AccumulationConfig:
    """The run the explorer's settings `kwargs` describe (defaults filled in), checked against the
    explorer's ranges and options as `check_state` checks them."""
    return _checked(kwargs)[1]


def _checked(kwargs: dict) -> tuple[dict, AccumulationConfig]:
    if not isinstance(kwargs, dict):
        raise TypeError(f"the explorer's settings must be a dict of keyword arguments, got {type(kwargs).__name__}")
    unknown = sorted(set(kwargs) - set(DEFAULTS))
    if unknown:
        raise ValueError(f"unknown explorer setting(s) {unknown}; allowed: {sorted(DEFAULTS)}")
    state = {**DEFAULTS, **kwargs}
    check_int("accumulation_steps", state["accumulation_steps"], *K_RANGE)
    check_int("micro_batch_size", state["micro_batch_size"], *B_RANGE)
    state["learning_rate"] = check_float("learning_rate", state["learning_rate"], *LR_RANGE, low_inclusive=True)
    check_int("num_updates", state["num_updates"], 1, 1000)
    check_int("seed", state["seed"], 0, 2**31 - 1)
    check_int("warmup_updates", state["warmup_updates"], 0, state["num_updates"])
    if state["max_grad_norm"] is not None and state["max_grad_norm"] not in CLIP_OPTIONS:
        raise ValueError(f"max_grad_norm must be None or one of {CLIP_OPTIONS}, got {state['max_grad_norm']!r}")
    if state["optimizer"] not in OPTIMIZER_NAMES:
        raise ValueError(f"optimizer must be one of {OPTIMIZER_NAMES}, got {state['optimizer']!r}")
    check_mistake(state["mistake"])
    config = AccumulationConfig(  # checks the mistake, the tail (< K) and what the mistake needs
        accumulation_steps=state["accumulation_steps"], micro_batch_size=state["micro_batch_size"],
        learning_rate=state["learning_rate"], num_updates=state["num_updates"], seed=state["seed"],
        mistake=state["mistake"],
        tail_micro_batches=state["tail_micro_batches"], max_grad_norm=state["max_grad_norm"],
        warmup_updates=state["warmup_updates"], optimizer=state["optimizer"],
    )
    state["mistake"] = config.mistake
    return state, config


def preset(name: str) -> dict:
    """The complete explorer kwargs of preset `name`; an unknown name lists the known ones."""
    if name not in PRESETS:
        raise ValueError(f"no preset named {name!r}; presets: {', '.join(PRESETS)}")
    return check_state(PRESETS[name].kwargs)


# --- the code --------------------------------------------------------------------------------

def _lr_index(lr: float) -> int:
    """The learning rate to 3 significant digits, as an index: m x 10^e, m in 100..999."""
    e = math.floor(math.log10(lr)) - 2
    m = round(lr / 10.0**e)
    if m == 1000:
        m, e = 100, e + 1
    if (e, m) == (-1, 100):  # 10.0, the top of the range
        return 4 * 900
    return (e + 5) * 900 + (m - 100)


def _lr_value(index: int) -> float:
    if index == 4 * 900:
        return 10.0
    e, m = divmod(index, 900)
    return float(f"{m + 100}e{e - 5}")


def _to_int(name: str, value: object) -> int:
    if name in ("accumulation_steps", "micro_batch_size", "num_updates"):
        return int(value) - 1
    if name == "learning_rate":
        return _lr_index(float(value))
    if name == "mistake":
        return 0 if value is None else MISTAKE_ORDER.index(value) + 1
    if name == "max_grad_norm":
        return 0 if value is None else CLIP_OPTIONS.index(value) + 1
    if name == "optimizer":
        return OPTIMIZER_NAMES.index(value)
    return int(value)


def _from_int(name: str, number: int) -> object:
    if name in ("accumulation_steps", "micro_batch_size", "num_updates"):
        return number + 1
    if name == "learning_rate":
        if number > 4 * 900:
            raise StateCodeError(f"the code's learning rate (index {number}) is outside {LR_RANGE}")
        return _lr_value(number)
    if name == "mistake":
        if number > len(MISTAKE_ORDER):
            raise StateCodeError(f"the code's mistake {number} is not one this version knows: a newer code? ask for a new one")
        return None if number == 0 else MISTAKE_ORDER[number - 1]
    if name == "max_grad_norm":
        if number > len(CLIP_OPTIONS):
            raise StateCodeError(f"the code's max_grad_norm choice {number} is not one of {CLIP_OPTIONS}")
        return None if number == 0 else CLIP_OPTIONS[number - 1]
    if name == "optimizer":
        if number >= len(OPTIMIZER_NAMES):
            raise StateCodeError(f"the code's optimizer {number} is not one of {OPTIMIZER_NAMES}: a newer code? "
                                 "ask for a new one")
        return OPTIMIZER_NAMES[number]
    return number


def _check_chars(text: str) -> str:
    crc = zlib.crc32(text.encode()) & 0x3FF
    return _ALPHABET[crc >> 5] + _ALPHABET[crc & 31]


def encode_state(kwargs: dict) -> str:
    """A short code for the explorer's settings `kwargs` (the learning rate kept to 3 significant
    digits); `decode_state` gives them back. Raises ValueError for settings the explorer refuses."""
    state = check_state(kwargs)
    changed = [name for name in WIDTHS if _to_int(name, state[name]) != _to_int(name, DEFAULTS[name])]
    bits = "".join("1" if name in changed else "0" for name in WIDTHS)
    bits += "".join(format(_to_int(name, state[name]), f"0{WIDTHS[name]}b") for name in changed)
    bits += "0" * (-len(bits) % 5)
    body = "".join(_ALPHABET[int(bits[i:i + 5], 2)] for i in range(0, len(bits), 5))
    body += _check_chars(PREFIX + body)
    return PREFIX + "-" + "-".join(body[i:i + 4] for i in range(0, len(body), 4))


def decode_state(code: str) -> dict:
    """The explorer kwargs a code from `encode_state` carries, checked against this explorer.

    Raises StateCodeError saying what is wrong: not a code, mistyped or cut short (the check
    characters disagree), made by another version of the lab, or asking for a setting this
    explorer does not allow."""
    if not isinstance(code, str):
        raise StateCodeError(f"a share code is a string like 'GA2-2021-9', got {type(code).__name__}")
    code = code.strip()  # a pasted code often brings a newline
    if len(code) > MAX_CODE_CHARS:  # checked first: the messages below quote the code, and a paste may be huge
        raise StateCodeError(f"a share code is at most {MAX_CODE_CHARS} characters (about 32 with dashes), got "
                             f"{len(code):,} starting {code[:20]!r}: copy just the code")
    text = "".join(_READS_AS.get(ch, ch) for ch in "".join(code.split()).replace("-", "").upper())
    if not text.startswith("GA") or len(text) < 3:
        raise StateCodeError(f"{code!r} is not an explorer share code: they start with {PREFIX!r}")
    if text[:3] != PREFIX:
        raise StateCodeError(
            f"{code!r} was made by another version of the lab (code version {text[2]!r}; this one reads "
            f"{PREFIX!r} codes): ask for a new code, made with this version")
    body = text[3:]
    bad = sorted(set(body) - set(_ALPHABET))
    if bad or len(body) < 4:
        raise StateCodeError(f"{code!r} is not a complete share code" + (f" (it holds {bad})" if bad else " (too short)")
                             + ": copy it again, whole")
    body, check = body[:-2], body[-2:]
    if _check_chars(PREFIX + body) != check:
        raise StateCodeError(f"{code!r} is mistyped or cut short (its check characters do not match): copy it again, whole")
    bits = "".join(format(_ALPHABET.index(ch), "05b") for ch in body)
    names = list(WIDTHS)
    changed = [name for name, bit in zip(names, bits) if bit == "1"]
    position, kwargs = len(names), {}
    for name in changed:
        if position + WIDTHS[name] > len(bits):
            raise StateCodeError(f"{code!r} is cut short: copy it again, whole")
        kwargs[name] = _from_int(name, int(bits[position:position + WIDTHS[name]], 2))
        position += WIDTHS[name]
    if len(bits) - position >= 5 or "1" in bits[position:]:
        raise StateCodeError(f"{code!r} has more in it than this version of the lab reads: a newer code? ask for a new one")
    try:
        return check_state(kwargs)
    except (TypeError, ValueError) as error:
        raise StateCodeError(f"{code!r} asks for settings this explorer does not allow ({error}): "
                             "a stale code? ask for a new one") from None


class ProjectorSettings(NamedTuple):
    """What the projector page shows: the explorer's keyword arguments, and a caption saying why."""

    kwargs: dict
    caption: str


def projector_settings(query: str = "", env: dict | None = None) -> ProjectorSettings:
    """(explorer kwargs, caption) for the projector page (present/explorer.ipynb).

    Read from the page's URL, `?state=CODE` or `?preset=NAME` (Voila hands the kernel the query
    string as $QUERY_STRING), else from $LAB_STATE / $LAB_PRESET (`make present STATE=...`), else
    the healthy default. A bad code or name shows the default, with the reason as the caption."""
    from urllib.parse import parse_qs

    env = os.environ if env is None else env
    asked = {k: v[-1] for k, v in parse_qs(query or "").items() if v}
    state = asked.get("state") or (None if asked.get("preset") else env.get("LAB_STATE"))
    name = asked.get("preset") or env.get("LAB_PRESET")
    try:
        if state:
            return ProjectorSettings(decode_state(state), f"settings from the code {state}")
        if name:
            return ProjectorSettings(preset(name), f"{name}: {PRESETS[name].shows}")
    except ValueError as error:
        return ProjectorSettings(check_state({}), f"showing the default settings: {error}")
    return ProjectorSettings(check_state({}), f"healthy: {PRESETS['healthy'].shows}")
