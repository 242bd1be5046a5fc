"""`widgets.progress()`: which checked exercises of which notebook this learner has passed.

    import widgets
    widgets.progress()              # a table: each exercise set, passed k of n, and which
    widgets.progress(reset=True)    # forget everything (one call)

Kept in one small JSON file on this computer (`~/.gradient-accumulation-lab/progress.json`, or
the file named by $LAB_PROGRESS_FILE): {set title: {exercise name: {"title", "passed"}}}.
The exercise toolkit reports to it: `note_exercises` when a notebook builds its set (so that
exercises not tried yet are listed too) and `note_check` after each `check()`. A pass is kept
once earned; a later wrong answer does not take it back. Writing is best-effort: a read-only home
folder must never break a check cell, so errors there are swallowed and the table says so.
"""
from __future__ import annotations

import html
import json
import os
import tempfile
from pathlib import Path

DEFAULT_FILE = Path.home() / ".gradient-accumulation-lab" / "progress.json"


def progress_file() -> Path:
    return Path(os.environ.get("LAB_PROGRESS_FILE") or DEFAULT_FILE)


def _load(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def _save(path: Path, data: dict) -> bool:
    """Write atomically (a half-written file would lose everything); False if it could not be written."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False, suffix=".tmp") as tmp:
            json.dump(data, tmp, indent=1, sort_keys=True)
        os.replace(tmp.name, path)
        return True
    except OSError:
        return False


def note_exercises(set_title: str, exercises: list[tuple[str, str]]) -> bool:
    """Register a notebook's exercise set: (name, title) pairs; keeps what was passed before."""
    path = progress_file()
    data = _load(path)
    entries = data.setdefault(set_title, {})
    for name, title in exercises:
        entries.setdefault(name, {"title": title, "passed": False})["title"] = title
    return _save(path, data)


def note_check(set_title: str, name: str, passed: bool, title: str | None = None) -> bool:
    """Record one `check()`; a pass sticks."""
    path = progress_file()
    data = _load(path)
    entry = data.setdefault(set_title, {}).setdefault(name, {"title": title or name, "passed": False})
    entry["passed"] = bool(entry.get("passed")) or bool(passed)
    return _save(path, data)


class Progress:
    """The table `progress()` shows: per exercise set, passed k of n and each exercise."""

    def __init__(self, data: dict, path: Path, note: str = ""):
        self.data, self.path, self.note = data, path, note

    def passed(self, set_title: str) -> list[str]:
        return [name for name, e in self.data.get(set_title, {}).items() if e.get("passed")]

    def __repr__(self) -> str:
        if not self.data:
            return f"No checked exercise tried yet ({self.path}).{self.note}"
        lines = []
        for set_title, entries in self.data.items():
            done = sum(bool(e.get("passed")) for e in entries.values())
            lines.append(f"{set_title}: passed {done} of {len(entries)}")
            lines += [f"  {'✓' if e.get('passed') else '·'} {e.get('title', name)}" for name, e in entries.items()]
        return "\n".join(lines + [f"(kept in {self.path}; widgets.progress(reset=True) forgets it){self.note}"])

    def _repr_markdown_(self) -> str:
        if not self.data:
            return html.escape(repr(self))
        rows = []
        for set_title, entries in self.data.items():
            done = sum(bool(e.get("passed")) for e in entries.values())
            marks = " ".join(f"{'✓' if e.get('passed') else '·'} {html.escape(e.get('title', n))}" for n, e in entries.items())
            rows.append(f"| {html.escape(set_title)} | {done} of {len(entries)} | {marks} |")
        return ("| exercises | passed | each |\n|---|---|---|\n" + "\n".join(rows)
                + f"\n\nKept in `{self.path}`; `widgets.progress(reset=True)` forgets it.{html.escape(self.note)}")


def progress(reset: bool = False) -> Progress:
    """The exercises passed so far; `reset=True` forgets them all first."""
    path = progress_file()
    note = ""
    if reset:
        try:
            path.unlink(missing_ok=True)
        except OSError as error:
            note = f" (could not reset: {error})"
    return Progress(_load(path), path, note)
