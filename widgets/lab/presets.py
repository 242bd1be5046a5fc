"""Named explorer settings for the classic demos, and the projector page's address read as settings, never run.

Torch-free: `make present` checks a preset's name here before anything starts."""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from urllib.parse import parse_qs


@dataclass(frozen=True)
class Preset:
    """A classic demo: the explorer's keyword arguments and what the picture shows."""

    kwargs: dict = field(default_factory=dict)
    shows: str = ""
    allclose: bool = True  # the verdict the readout gives


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


def preset(name: str) -> dict:
    """The explorer kwargs of preset `name`; an unknown name lists the known ones."""
    if name not in PRESETS:
        raise ValueError(f"no preset named {name!r}; presets: {', '.join(PRESETS)}")
    return dict(PRESETS[name].kwargs)


# How the projector's address spells each setting ("none" for a setting that may be None); text is never run.
READERS = {
    "accumulation_steps": int, "micro_batch_size": int, "learning_rate": float, "mistake": str,
    "num_updates": int, "seed": int, "tail_micro_batches": int, "max_grad_norm": float,
    "warmup_updates": int, "optimizer": str,
}


def _read(key: str, text: str) -> object:
    if key in ("mistake", "max_grad_norm") and text.lower() in ("", "none"):
        return None
    try:
        return READERS[key](text)
    except ValueError:
        raise ValueError(f"{key}={text[:40]!r} is not a number") from None  # only numbers fail to read


def projector_settings(query: str = "", env: dict | None = None) -> tuple[dict, str]:
    """(the explorer's kwargs, a caption saying why) from the page's address ($QUERY_STRING under Voila), else
    $LAB_PRESET, else the default: `?preset=uneven-tail&seed=3`, `?accumulation_steps=8&mistake=loss_not_divided`.
    The explorer checks the values; a name or a value that cannot be read gives the default, the reason its caption."""
    env = os.environ if env is None else env
    asked = {k: v[-1] for k, v in parse_qs(query or "", keep_blank_values=True).items() if k != "token"}  # the page's key
    name = asked.pop("preset", None) or (None if asked else env.get("LAB_PRESET"))
    try:
        unknown = sorted(set(asked) - set(READERS))
        if unknown:
            raise ValueError(f"unknown setting(s) {unknown}; allowed: preset, {', '.join(READERS)}")
        kwargs = {**(preset(name) if name else {}), **{key: _read(key, text) for key, text in asked.items()}}
    except ValueError as error:
        return {}, f"showing the default settings: {error}"
    if asked:
        return kwargs, f"{name or 'settings'} with " + ", ".join(f"{k}={v}" for k, v in asked.items())
    return kwargs, f"{name or 'healthy'}: {PRESETS[name or 'healthy'].shows}"
