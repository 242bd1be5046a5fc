"""`widgets.progress()`: which checked exercises of which notebook this learner has passed (`reset=True` forgets).

Kept in ~/.gradient-accumulation-lab/progress.json (or $LAB_PROGRESS_FILE) as {"format": 2, "sets": {set: {exercise:
{"title", "passed"}}}, "records": [Record, ...]}. Each write replaces the file under a `filelock`: kernels checking at
once lose nothing, a reader (the room view) needs no lock. A folder it creates is private (0700), its files 0600.
Saving is best-effort: a check cell never breaks, and progress() says why it could not save."""
from __future__ import annotations

import html
import json
import os
import stat
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from filelock import FileLock, Timeout

FORMAT = 2
DEFAULT_NAME = Path(".gradient-accumulation-lab", "progress.json")  # under the home folder
MAX_RECORDS = 2000  # the oldest records beyond this are dropped; passes are kept whatever their age
MAX_TEXT = 200  # characters kept of a title or name
MAX_BYTES = 1 << 20  # 2000 records are far less: a bigger file is not one this lab wrote
LOCK_TIMEOUT_S = 20.0  # a kernel holds the lock for milliseconds; past this give up saving


class ProgressError(OSError):
    """The progress file cannot be used: no home folder, unreadable, not a progress file, or locked too long."""


@dataclass(frozen=True)
class Record:
    """One `check()` with a verdict: what a room view reads."""

    notebook: str  # the exercise set's title (one set per notebook)
    exercise: str  # the exercise's name, as in `ex.<name>.check(...)`
    result: str  # "correct" or "incorrect"
    time: str  # UTC, ISO 8601 to the second: "2026-11-30T18:15:00Z"


_FIELDS = Record.__dataclass_fields__.keys()


def progress_file() -> Path:
    """$LAB_PROGRESS_FILE, else ~/.gradient-accumulation-lab/progress.json."""
    named = os.environ.get("LAB_PROGRESS_FILE")
    if named:
        return Path(named)
    try:
        return Path.home() / DEFAULT_NAME
    except (RuntimeError, KeyError):  # no $HOME and a user id with no passwd entry (some containers)
        raise ProgressError("there is no home folder: set LAB_PROGRESS_FILE to a file in a writable folder") from None


def _empty() -> dict:
    return {"format": FORMAT, "sets": {}, "records": []}


def _read(path: Path) -> dict:
    """The store at `path` (empty if there is no file); ProgressError saying why it cannot be read."""
    try:
        # O_NONBLOCK: a FIFO planted at the path must not hold the lock waiting for a writer
        with open(os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)), "rb") as file:
            info = os.fstat(file.fileno())
            if hasattr(os, "geteuid") and info.st_uid != os.geteuid():  # planted in a shared /tmp
                raise ProgressError(f"{path} belongs to another user: set LAB_PROGRESS_FILE to a file in a folder of yours")
            if not stat.S_ISREG(info.st_mode):
                raise ProgressError(f"{path} is not a regular file")
            content = file.read(MAX_BYTES + 1)
            if len(content) > MAX_BYTES:
                raise ProgressError(f"{path} is larger than a progress file ({MAX_BYTES // 2**20} MB at most)")
            store = json.loads(content)
    except FileNotFoundError:
        return _empty()
    except ProgressError:
        raise
    except OSError as error:
        raise ProgressError(f"{path} cannot be read ({error.strerror})") from None
    except ValueError as error:
        raise ProgressError(f"{path} is not a progress file this lab wrote ({error})") from None
    if not (isinstance(store, dict) and store.get("format") == FORMAT and isinstance(store.get("sets"), dict)
            and all(isinstance(entries, dict) and all(isinstance(e, dict) and isinstance(e.get("title"), str)
                                                      and isinstance(e.get("passed"), bool) for e in entries.values())
                    for entries in store["sets"].values())
            and isinstance(store.get("records"), list)
            and all(isinstance(r, dict) and r.keys() == _FIELDS for r in store["records"])):
        raise ProgressError(f"{path} is not a progress file this lab wrote (format {FORMAT}: sets and records)")
    return store


def read_records(path: str | os.PathLike | None = None) -> list[Record]:
    """Every check recorded in the progress file at `path` (default: this learner's), oldest first; takes no lock."""
    return [Record(**r) for r in read_store(path)["records"]]


def read_store(path: str | os.PathLike | None = None) -> dict:
    """The whole progress file at `path` (default: this learner's): its exercise sets and its records; no lock."""
    return _read(progress_file() if path is None else Path(path))


def _lock(path: Path) -> FileLock:
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    return FileLock(path.with_name(path.name + ".lock"), timeout=LOCK_TIMEOUT_S, mode=0o600)


def _write(path: Path, store: dict) -> None:
    """Replace the file whole; under the lock, so one temporary name serves (a killed write's is overwritten)."""
    store["records"] = store["records"][-MAX_RECORDS:]
    temporary = path.with_name(path.name + ".tmp")
    try:  # a fresh file, never one already there: a link or a file planted under this name is not written through
        os.unlink(temporary)
    except FileNotFoundError:
        pass
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    with open(fd, "w", encoding="utf-8") as file:
        json.dump(store, file, indent=1, ensure_ascii=False)
        file.flush()
        os.fsync(file.fileno())  # on disk before it replaces the old file
    os.replace(temporary, path)


_last_problem: str | None = None  # why this kernel's last save failed (None: it succeeded); progress() says it


def _update(change: Callable[[dict], bool]) -> bool:
    """Read, change and write the store under the lock; True if saved. Never raises: a check cell must not break."""
    global _last_problem
    try:
        path = progress_file()
        with _lock(path):
            store = _read(path)
            if change(store):  # nothing new (a notebook opened again): no write
                _write(path, store)
        _last_problem = None
        return True
    except Exception as error:  # noqa: BLE001 -- saving is best-effort, the check's verdict is what matters
        _last_problem = _why(error)
    return False


def _why(error: Exception) -> str:
    if isinstance(error, Timeout):
        return f"the progress file was locked by another kernel for over {LOCK_TIMEOUT_S:g} s"
    return error.strerror if isinstance(error, OSError) and error.strerror else str(error)


def note_exercises(set_title: str, exercises: list[tuple[str, str]]) -> bool:
    """Register a notebook's exercise set: (name, title) pairs; keeps what was passed before. True if saved."""
    def change(store: dict) -> bool:
        entries = store["sets"].setdefault(set_title[:MAX_TEXT], {})
        before = json.dumps(entries, sort_keys=True)
        for name, title in exercises:
            entries.setdefault(name[:MAX_TEXT], {"title": title[:MAX_TEXT], "passed": False})["title"] = title[:MAX_TEXT]
        return json.dumps(entries, sort_keys=True) != before

    return _update(change)


def note_check(set_title: str, name: str, passed: bool, title: str | None = None) -> bool:
    """Record one `check()` with a verdict; a pass sticks. True if saved."""
    def change(store: dict) -> bool:
        record = {"notebook": set_title[:MAX_TEXT], "exercise": name[:MAX_TEXT], "result": "correct" if passed
                  else "incorrect", "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        entry = store["sets"].setdefault(record["notebook"], {}).setdefault(
            record["exercise"], {"title": (title or name)[:MAX_TEXT], "passed": False})
        entry["passed"] = entry["passed"] or bool(passed)
        store["records"].append(record)
        return True

    return _update(change)


@dataclass
class Progress:
    """The table `progress()` shows: per exercise set, passed k of n and each exercise; problems first."""

    data: dict
    path: Path | None
    problems: list[str] = field(default_factory=list)
    records: list[Record] = field(default_factory=list)

    def _table(self) -> list[tuple[str, int, list[tuple[bool, str]]]]:
        return [(set_title, sum(bool(e["passed"]) for e in entries.values()),
                 [(bool(e["passed"]), e.get("title", name)) for name, e in entries.items()])
                for set_title, entries in self.data.items()]

    def __repr__(self) -> str:
        lines = list(self.problems)
        if not self.data:
            return "\n".join(lines + [f"No checked exercise tried yet ({self.path})."])
        for set_title, done, marks in self._table():
            lines.append(f"{set_title}: passed {done} of {len(marks)}")
            lines += [f"  {'✓' if ok else '·'} {title}" for ok, title in marks]
        if self.records:
            last = self.records[-1]
            lines.append(f"last tried: {last.exercise} ({last.notebook}), {last.time}")
        return "\n".join(lines + [f"(kept in {self.path}; widgets.progress(reset=True) forgets it)"])

    def _repr_markdown_(self) -> str:
        notes = "".join(f"**{html.escape(n)}**\n\n" for n in self.problems)
        if not self.data:
            return notes + html.escape(f"No checked exercise tried yet ({self.path}).")
        rows = [f"| {html.escape(set_title)} | {done} of {len(marks)} | "
                + " ".join(f"{'✓' if ok else '·'} {html.escape(title)}" for ok, title in marks) + " |"
                for set_title, done, marks in self._table()]
        return (notes + "| exercises | passed | each |\n|---|---|---|\n" + "\n".join(rows)
                + f"\n\nKept in `{self.path}`; `widgets.progress(reset=True)` forgets it.")


def progress(reset: bool = False) -> Progress:
    """The exercises passed so far; `reset=True` forgets them all first."""
    global _last_problem
    if not isinstance(reset, bool):  # progress(reset="no") must not forget everything
        raise TypeError(f"reset must be True or False, got {reset!r}")
    try:
        path = progress_file()
    except ProgressError as error:
        return Progress({}, None, [f"Progress cannot be saved: {error}."])
    problems = []
    try:
        with _lock(path):
            if reset:
                path.unlink(missing_ok=True)
                _last_problem = None
    except (OSError, Timeout) as error:
        problems.append(f"Progress cannot be saved: {_why(error)}. Checks still work; "
                        "set LAB_PROGRESS_FILE to a file in a writable folder to keep them.")
    if not problems and _last_problem:
        problems.append(f"The last check could not be saved: {_last_problem}.")
    try:
        store = _read(path)
    except ProgressError as error:
        problems.append(f"Progress cannot be read: {error}. Move it away, or forget it: widgets.progress(reset=True).")
        store = _empty()
    return Progress(store["sets"], path, problems, [Record(**r) for r in store["records"]])
