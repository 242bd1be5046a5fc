"""The explorer and the bricks on the book site, without a kernel: their main controls over pictures drawn ahead.

torch does not run in a browser, so `make site` draws each setting ahead with the notebook cell's own widget (the
explorer built at that setting; the bricks moved there through their controls) and keeps what the widget shows:
its picture (a palette PNG, as the notebook's saved fallback is), the picture's words and the readout. A page's
small script (interactive/controls.js) swaps them when a control moves. A page offers the grids below; the
notebook runs every setting for real.
"""
from __future__ import annotations

import functools
import hashlib
import html
import itertools
import json
import math
from dataclasses import dataclass
from pathlib import Path

from widgets.draw.stills import img_html, quantized
from widgets.lessons.beginner_1 import MAX_TRIPS, make_bricks_widget
from widgets.lessons.beginner_2 import make_accumulation_explorer
from widgets.lessons.beginner_2.controls import MAIN_MISTAKES, RANGES

# Where `snippets` writes the pictures, relative to the site root (E's preprocessor puts out_dir there); the page's
# script finds the root from the page (Sphinx's data-content_root), so the blocks work at any depth.
URL_PREFIX = "_static/interactive/"
SCRIPT = Path(__file__).with_name("interactive") / "controls.js"
# Pictures one block may offer: about 15 KB each, fewer files where settings draw the same frame; the browser test
# holds what a block adds to its page (0.7-0.8 MB with the grids below) under 1 MB.
MAX_STATES = 100

# The explorer's grid: K by powers of two over its slider, b at the three splits of beginner_2's wall of 32
# (16 x 2, 4 x 8, 1 x 32), the correct loop and the mistakes the explorer's menu lists first.
EXPLORER_K = (1, 2, 4, 8, 16)
EXPLORER_B = (2, 8, 32)
EXPLORER_MISTAKES = ("", *MAIN_MISTAKES)
# The cells whose widget the page replaces, (notebook file stem, cell id) -> the keywords the cell builds it with
# (tests/site/test_static_states.py checks them against the cells' saved outputs).
EXPLORER_CELLS = {("beginner_2_watch_a_model_learn", "b2-02"): dict(accumulation_steps=4, micro_batch_size=2)}
BRICKS_CELLS = {("00_start_here", "sh-01"): dict(micro_batch_size=3, accumulation_steps=4),
                ("beginner_1_carrying_bricks", "b1-10"): dict(micro_batch_size=5, accumulation_steps=4)}


@dataclass(frozen=True)
class Control:
    """One control on the page: the widget's own name and label, the values the page offers, where it starts."""

    name: str
    label: str
    values: tuple
    start: object
    kind: str  # "range", "select" (with `names`, the widget's option labels) or "checkbox"
    names: tuple[str, ...] = ()


@dataclass(frozen=True)
class State:
    """What the widget shows at one setting: its picture (palette PNG), the picture's words, the readout (HTML)."""

    png: bytes
    alt: str
    readout: str


_palette_png = functools.lru_cache(maxsize=None)(quantized)  # many settings draw the same frame; quantizing costs most


def shown(widget) -> State:
    """What `widget` (an explorer or the bricks) shows now, as the notebook's static fallback keeps its picture; the
    explorer's readout ends with the call that draws this picture, which the learner can run in the notebook."""
    calls = [f"<p>{widget.call_text.value}</p>"] if hasattr(widget, "call_text") else []
    return State(_palette_png(bytes(widget.image.value)), widget.image.tooltip, "".join([widget.readout.value, *calls]))


def _check_grid(what: str, controls: list[Control], count: int) -> None:
    """Refuse a grid the page cannot offer, before anything is drawn: a start outside its values, or more pictures
    than a page should carry."""
    for control in controls:
        if control.start not in control.values:
            raise ValueError(f"{control.name} must start at one of its values {control.values}, got {control.start!r}")
    if count > MAX_STATES:
        raise ValueError(f"the {what}'s grid holds {count} pictures, at most {MAX_STATES} (each is a PNG the page "
                         "may load): offer fewer values")


def _check_values(name: str, values, low: int, high: int) -> tuple[int, ...]:
    """`values` as a tuple, if it holds whole numbers from `low` to `high`; else a ValueError naming `name`."""
    values = tuple(values)
    if not values or not all(isinstance(v, int) and not isinstance(v, bool) and low <= v <= high for v in values):
        raise ValueError(f"{name} must be whole numbers from {low} to {high}, got {values!r}")
    return values


def explorer_states(start: dict, accumulation_steps=EXPLORER_K, micro_batch_size=EXPLORER_B,
                    mistake=EXPLORER_MISTAKES) -> tuple[list[Control], dict[tuple, State]]:
    """The explorer's controls on the page, starting as the cell builds it with `start` (make_accumulation_explorer's
    keywords), and what it shows at each (K, b, mistake) of the grid ("" is the correct loop). Each state is an
    explorer built at that setting: a moved one keeps its pile's scale while the data fill it, so its picture would
    depend on the order the grid is walked."""
    accumulation_steps = _check_values("accumulation_steps", accumulation_steps, *RANGES["accumulation_steps"])
    micro_batch_size = _check_values("micro_batch_size", micro_batch_size, *RANGES["micro_batch_size"])
    explorer = make_accumulation_explorer(**start)
    c = explorer.controls
    labels = {value: label for label, value in c["mistake"].options}
    mistake = tuple(mistake)
    if not mistake or not set(mistake) <= set(labels):
        raise ValueError(f"mistake must be among the explorer's {list(labels)}, got {mistake!r}")
    controls = [
        Control("accumulation_steps", c["accumulation_steps"].description, accumulation_steps,
                c["accumulation_steps"].value, "range"),
        Control("micro_batch_size", c["micro_batch_size"].description, micro_batch_size, c["micro_batch_size"].value,
                "select", tuple(str(b) for b in micro_batch_size)),
        Control("mistake", c["mistake"].description, mistake, c["mistake"].value, "select",
                tuple(labels[m] for m in mistake)),
    ]
    explorer.close()
    _check_grid("explorer", controls, math.prod(len(control.values) for control in controls))
    states = {}
    for K, b, m in itertools.product(accumulation_steps, micro_batch_size, mistake):
        explorer = make_accumulation_explorer(**{**start, "accumulation_steps": K, "micro_batch_size": b,
                                                 "mistake": m or None})
        states[K, b, m] = shown(explorer)
        explorer.close()
    return controls, states


def bricks_states(start: dict, trips=tuple(range(1, MAX_TRIPS + 1))) -> tuple[list[Control], dict[tuple, State]]:
    """The bricks' controls on the page (trips done, K among `trips`, the forget-to-divide box) and what the widget
    shows at each, moved there from the widget the cell builds with `start` (make_bricks_widget's keywords)."""
    trips = _check_values("trips", trips, 1, MAX_TRIPS)
    widget = make_bricks_widget(**start)
    c = widget.controls
    controls = [
        Control("trip", c["trip"].description, tuple(range(max(trips) + 1)), c["trip"].value, "range"),
        Control("accumulation_steps", c["accumulation_steps"].description, trips, c["accumulation_steps"].value,
                "range"),
        Control("divided", c["divided"].description, (False, True), c["divided"].value, "checkbox"),
    ]
    _check_grid("bricks", controls, 2 * sum(K + 1 for K in trips))
    states = {}
    for K, forget in itertools.product(trips, (False, True)):
        c["accumulation_steps"].value = K  # the widget's own path: the trip slider's end follows K
        c["divided"].value = forget
        for trip in range(K + 1):
            c["trip"].value = trip
            states[trip, K, forget] = shown(widget)
    return controls, states


def _control_html(control: Control, block_id: str) -> str:
    """A labelled native control (a range shows its value beside it); `data-values` maps positions to values."""
    ident = f"{block_id}-{control.name}"
    label = f'<label for="{ident}">{html.escape(control.label)}</label>'
    values = html.escape(json.dumps(control.values), quote=True)
    common = f'id="{ident}" name="{control.name}" data-values="{values}"'
    if control.kind == "checkbox":
        checked = " checked" if control.start else ""
        return f'<div><input type="checkbox" {common}{checked}> {label}</div>'
    if control.kind == "select":
        options = "".join(f'<option value="{i}"{" selected" if value == control.start else ""}>{html.escape(name)}'
                          "</option>" for i, (value, name) in enumerate(zip(control.values, control.names)))
        return f"<div>{label} <select {common}>{options}</select></div>"
    at = control.values.index(control.start)
    return (f'<div>{label} <input type="range" {common} min="0" max="{len(control.values) - 1}" step="1" '
            f'value="{at}" aria-valuetext="{control.start}"> <output for="{ident}">{control.start}</output></div>')


def block(block_id: str, controls: list[Control], states: dict[tuple, State], note: str, out_dir: Path) -> str:
    """The HTML block for one cell: `note`, the controls, the start picture (inline, so it shows without the script)
    and its readout, the states as JSON; each state's picture written once under `out_dir`, named by its bytes."""
    table = {}
    for key, state in states.items():
        name = hashlib.sha256(state.png).hexdigest()[:16] + ".png"
        if not (out_dir / name).exists():
            (out_dir / name).write_bytes(state.png)
        table["|".join(json.dumps(value) for value in key)] = {"png": name, "alt": state.alt, "readout": state.readout}
    first = states[tuple(control.start for control in controls)]
    data = json.dumps({"prefix": URL_PREFIX, "states": table}).replace("</", "<\\/")
    return (f'<div class="lab-static" id="{block_id}">\n<p class="lab-static-note"><em>{html.escape(note)}</em></p>\n'
            f'<div class="lab-static-controls">{"".join(_control_html(c, block_id) for c in controls)}</div>\n'
            f"{img_html(first.png, first.alt)}\n"
            f'<div class="lab-static-readout" aria-live="polite">{first.readout}</div>\n'
            f'<script type="application/json">{data}</script>\n'
            f"<script>{SCRIPT.read_text(encoding='utf-8')}</script>\n</div>")


def _offered(values) -> str:
    """'1, 2 or 4': the values a control offers, as the page's note says them."""
    return ", ".join(str(v) for v in values[:-1]) + " or " + str(values[-1]) if len(values) > 1 else str(values[0])


def snippets(out_dir: Path) -> dict[tuple[str, str], str]:
    """(notebook file stem, cell id) -> the HTML block that replaces that cell's widget output on the site; the
    pictures the blocks load are written under `out_dir` (served at `URL_PREFIX` from the site root)."""
    if not isinstance(out_dir, Path):
        raise TypeError(f"out_dir must be a pathlib.Path, got {type(out_dir).__name__}")
    if out_dir.exists() and not out_dir.is_dir():
        raise ValueError(f"out_dir must be a folder, and {out_dir} is a file")
    out_dir.mkdir(parents=True, exist_ok=True)
    blocks = {}
    for (stem, cell), start in EXPLORER_CELLS.items():
        controls, states = explorer_states(start)
        blocks[stem, cell] = block(
            f"lab-static-{cell}", controls, states,
            f"Drawn ahead by the lab's own code for K = {_offered(EXPLORER_K)}, b = {_offered(EXPLORER_B)} and "
            f"{len(EXPLORER_MISTAKES) - 1} mistakes; the notebook trains the model live, with every setting.", out_dir)
    for (stem, cell), start in BRICKS_CELLS.items():
        controls, states = bricks_states(start)
        blocks[stem, cell] = block(
            f"lab-static-{cell}", controls, states,
            f"Drawn ahead by the lab's own code with {start['micro_batch_size']} bricks per trip, for 1 to "
            f"{MAX_TRIPS} trips; in the notebook you can also change the bricks per trip.", out_dir)
    return blocks
