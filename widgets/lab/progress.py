"""`widgets.progress()`: which checked exercises of which notebook this learner has passed.

    import widgets
    widgets.progress()              # a table: each exercise set, passed k of n, and which
    widgets.progress(reset=True)    # forget everything (one call)

Kept in one small JSON file (`~/.gradient-accumulation-lab/progress.json`, or the file named by
$LAB_PROGRESS_FILE). The exercise toolkit reports to it: `note_exercises` when a notebook builds
its set (so that exercises not tried yet are listed too) and `note_check` after each `check()`,
which also appends a record (notebook, exercise, result, time) that a room view reads with
`read_records(path)`; the last record is the last exercise tried.

A store that cannot lose data:
- only a missing file counts as empty; an unreadable, corrupt or oversized one is set aside next
  to it (`progress.json.unreadable-20261130T181500Z`), never overwritten, and progress() names it;
- each write reads, merges and replaces the file atomically while holding an flock on
  `progress.json.lock`, so two kernels checking at once lose nothing (flock works on NFS homes);
- the file is bounded (MAX_RECORDS, MAX_BYTES), and a FIFO or device at the path is never read;
- a file or lock that belongs to another user is refused, never read or waited on (on a shared
  machine another user could plant one in /tmp first), the lock is opened without following a link,
  and temporary files a killed write left behind are swept under the lock;
- saving is best-effort: a read-only or missing home folder never breaks a check cell, and
  progress() says that progress cannot be saved, and why.
JSON under a lock rather than SQLite: the same guarantees in fewer lines, and a reader (the room
view) needs no lock and no write access, since a file replaced atomically is always whole.
"""
from __future__ import annotations

import errno
import fcntl
import html
import json
import os
import stat
import tempfile
import time
import warnings
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Sequence

FORMAT = 2  # format 1 (before records) was {set title: {exercise name: {"title", "passed"}}}; still read
DEFAULT_NAME = Path(".gradient-accumulation-lab", "progress.json")  # under the home folder
MAX_BYTES = 1 << 20  # 1 MiB: a bigger file is not a progress file this lab wrote; it is set aside unread
MAX_RECORDS = 2000  # the oldest records beyond this are dropped; passes are kept whatever their age
MAX_TEXT = 200  # characters kept of a title or name
LOCK_TIMEOUT_S = 20.0  # a kernel holds the lock for milliseconds; past this (a stuck NFS server?) give up saving
RESULTS = ("correct", "incorrect")
NOT_A_FILE = errno.ENODEV  # the errno of a ProgressError for a FIFO, device or folder at the path
NOT_OURS = errno.EPERM  # the errno of a ProgressError for a file or lock another user owns
SET_ASIDE = ".unreadable-"  # progress.json.unreadable-<UTC time>: a file that could not be read, kept


class ProgressError(OSError):
    """The progress file cannot be used: no home folder, unreadable, corrupt, or locked too long."""


class ProgressWarning(UserWarning):
    """Said once, when an unreadable progress file is set aside."""


@dataclass(frozen=True)
class Record:
    """One `check()` with a verdict: what a room view reads."""

    notebook: str  # the exercise set's title (one set per notebook)
    exercise: str  # the exercise's name, as in `ex.<name>.check(...)`
    result: str  # "correct" or "incorrect"
    time: str  # UTC, ISO 8601 to the second: "2026-11-30T18:15:00Z"


def progress_file() -> Path:
    """$LAB_PROGRESS_FILE, else ~/.gradient-accumulation-lab/progress.json; ProgressError if there is no home."""
    named = os.environ.get("LAB_PROGRESS_FILE")
    if named:
        return Path(named)
    try:
        return Path.home() / DEFAULT_NAME
    except (RuntimeError, KeyError):  # no $HOME and a user id with no passwd entry (some containers)
        raise ProgressError(errno.ENOENT, "there is no home folder (no $HOME, and this user id has no entry in /etc/passwd): "
                            "set LAB_PROGRESS_FILE to a file in a writable folder") from None


# --- reading ---------------------------------------------------------------------------------

def _empty() -> dict:
    return {"format": FORMAT, "sets": {}, "records": []}


def _text(value: object, what: str) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{what} is {type(value).__name__}, not text")
    return value[:MAX_TEXT]


def _parse(raw: bytes) -> dict:
    """The store in `raw`, checked field by field; ValueError saying what is wrong with its shape."""
    try:
        data = json.loads(raw)
    except RecursionError:  # valid JSON nested thousands deep
        raise ValueError("nested too deeply") from None
    if not isinstance(data, dict):
        raise ValueError(f"holds a {type(data).__name__}, not an object")
    if "format" in data:
        if data["format"] != FORMAT:
            raise ValueError(f"is format {data['format']!r}; this lab reads format {FORMAT}")
        sets, records = data.get("sets"), data.get("records")
    else:
        sets, records = data, []
    if not isinstance(sets, dict) or not isinstance(records, list):
        raise ValueError("has no 'sets' object or no 'records' list")
    store = _empty()
    for set_title, entries in sets.items():
        if not isinstance(entries, dict):
            raise ValueError(f"set {set_title[:MAX_TEXT]!r} holds a {type(entries).__name__}, not an object")
        kept = store["sets"][set_title[:MAX_TEXT]] = {}
        for name, entry in entries.items():
            if not isinstance(entry, dict) or not isinstance(entry.get("passed", False), bool):
                raise ValueError(f"exercise {name[:MAX_TEXT]!r} is not {{'title': text, 'passed': true/false}}")
            kept[name[:MAX_TEXT]] = {"title": _text(entry.get("title", name), "a title"), "passed": entry.get("passed", False)}
    for record in records:
        if not isinstance(record, dict) or set(record) != {"notebook", "exercise", "result", "time"}:
            raise ValueError("holds a record that is not {notebook, exercise, result, time}")
        if record["result"] not in RESULTS:
            raise ValueError(f"holds a result {str(record['result'])[:MAX_TEXT]!r}, not one of {RESULTS}")
        store["records"].append({k: _text(v, k) for k, v in record.items()})
    return store


def _read(path: Path) -> dict:
    """The store at `path`, or an empty one if there is no file; else ProgressError saying why not.

    Its errno is NOT_A_FILE for a FIFO, a device or a folder at the path: never read, never moved.
    Any other (unreadable, corrupt, too big) is a file the next write sets aside."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # O_NONBLOCK: opening a FIFO must not wait for a writer
    except (FileNotFoundError, NotADirectoryError):  # nothing there yet (or its folder is a file: saving says so)
        return _empty()
    except IsADirectoryError:
        raise ProgressError(NOT_A_FILE, f"{path} is a folder, not a progress file: move it away") from None
    except OSError as error:
        raise ProgressError(error.errno, f"{path} cannot be opened ({error.strerror})") from None
    try:
        info = os.fstat(fd)  # of what was opened: no race with a rename between a stat and the open
        if not stat.S_ISREG(info.st_mode):
            raise ProgressError(NOT_A_FILE, f"{path} is not a regular file (a FIFO or a device?): move it away, "
                                "or set LAB_PROGRESS_FILE to a file")
        _check_owner(path, info)
        if info.st_size > MAX_BYTES:
            raise ProgressError(errno.EINVAL, f"{path} is {info.st_size / 2**20:.0f} MB, more than any progress "
                                f"file ({MAX_BYTES // 2**20} MB at most)")
        chunks, size = [], 0
        while chunk := os.read(fd, 1 << 16):  # bounded even if the file grows while we read it
            chunks.append(chunk)
            size += len(chunk)
            if size > MAX_BYTES:
                raise ProgressError(errno.EINVAL, f"{path} grew past {MAX_BYTES // 2**20} MB while being read")
    except ProgressError:
        raise
    except OSError as error:  # EIO from a failing disk or an NFS server
        raise ProgressError(error.errno, f"{path} cannot be read ({error.strerror})") from None
    finally:
        os.close(fd)
    try:
        return _parse(b"".join(chunks))
    except ValueError as error:  # UnicodeDecodeError and JSONDecodeError are ValueErrors too
        raise ProgressError(errno.EINVAL, f"{path} is not a progress file this lab wrote ({error})") from None


def _check_owner(path: Path, info: os.stat_result) -> None:
    """Refuse a file another user owns: on a shared machine it could have been put there to be read as
    ours (passes that are not the learner's) or to stall our saves. Never moved: not ours to move."""
    if info.st_uid != os.geteuid():
        raise ProgressError(NOT_OURS, f"{path} belongs to another user (uid {info.st_uid}), not to you: it is neither "
                            "read nor written. Set LAB_PROGRESS_FILE to a file in a folder only you can write, "
                            'e.g. "$(mktemp -d)/progress.json"')


def read_records(path: str | os.PathLike | None = None) -> list[Record]:
    """Every check recorded in the progress file at `path` (default: this learner's), oldest first.

    For a room view: [] if there is no file; ProgressError saying why if it cannot be read.
    Takes no lock and writes nothing: the file is replaced whole, so a read never sees half a write."""
    if path is not None and not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be a file path (str or Path), got {type(path).__name__}")
    store = _read(progress_file() if path is None else Path(path))
    return [Record(**r) for r in store["records"]]


# --- writing ---------------------------------------------------------------------------------

@contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Hold an exclusive flock on `<path>.lock` (not on the file itself: it is replaced, not rewritten)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = path.with_name(path.name + ".lock")
    try:  # O_NOFOLLOW: a link planted at the lock's name is refused (ELOOP), never followed
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o600)
    except OSError as error:
        raise ProgressError(error.errno, f"{lock} cannot be opened ({error.strerror}"
                            + ("; a link is never followed)" if error.errno == errno.ELOOP else ")")) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ProgressError(NOT_A_FILE, f"{lock} is not a regular file: move it away")
        _check_owner(lock, info)  # another user's lock could be held by them for ever
        deadline = time.monotonic() + LOCK_TIMEOUT_S
        while True:  # non-blocking tries: a kernel stuck holding the lock must not hang this check cell
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise ProgressError(errno.EAGAIN, f"{path} was locked by another kernel for over "
                                        f"{LOCK_TIMEOUT_S:g} s") from None
                time.sleep(0.001)  # short: a waiter that sleeps long is starved by busy writers
        yield
    finally:
        os.close(fd)  # releases the lock


def _set_aside(path: Path, why: str) -> Path:
    """Rename the unreadable file next to itself, with the time; never overwrite an earlier one."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    aside = path.with_name(f"{path.name}{SET_ASIDE}{stamp}")
    n = 0
    while aside.exists():
        n += 1
        aside = path.with_name(f"{path.name}{SET_ASIDE}{stamp}-{n}")
    os.rename(path, aside)
    try:  # said where it happens; and progress() lists set-aside files for as long as they are there
        warnings.warn(f"{why}. It was kept as {aside} and a new progress file started "
                      "(see the README's troubleshooting to recover it).", ProgressWarning, stacklevel=4)
    except Warning:  # warnings turned into errors must not break the check cell either
        pass
    return aside


def _write(path: Path, store: dict) -> None:
    """Replace the file atomically (a half-written file would lose everything), at most MAX_BYTES."""
    store["records"] = store["records"][-MAX_RECORDS:]
    text = json.dumps(store, indent=1, ensure_ascii=False)
    while len(text.encode()) > MAX_BYTES and store["records"]:  # only if titles are unusually long
        store["records"] = store["records"][len(store["records"]) // 2 + 1:]
        text = json.dumps(store, indent=1, ensure_ascii=False)
    if len(text.encode()) > MAX_BYTES:
        raise ProgressError(errno.EFBIG, f"the exercise sets alone would take more than {MAX_BYTES // 2**20} MB")
    with tempfile.NamedTemporaryFile("w", dir=path.parent, prefix=path.name + ".", suffix=".tmp",
                                     delete=False, encoding="utf-8") as tmp:
        try:
            tmp.write(text)
            tmp.flush()
            os.fsync(tmp.fileno())  # on disk before it replaces the old file
        except BaseException:
            os.unlink(tmp.name)
            raise
    os.replace(tmp.name, path)


def _sweep_temporary(path: Path) -> None:
    """Delete our `progress.json.*.tmp` left by a write that was killed: called under the lock, when no
    write of ours can be under way (each writes its temporary file only while holding the lock)."""
    for leftover in path.parent.glob(path.name + ".*.tmp"):
        try:
            if leftover.lstat().st_uid == os.geteuid():
                leftover.unlink()
        except OSError:
            pass


_last_problem: str | None = None  # why this kernel's last save failed (None: it succeeded); progress() says it


def _update(change: Callable[[dict], bool]) -> bool:
    """Read, change and write the store under the lock; True if saved. Never raises: a check cell must not break."""
    global _last_problem
    try:
        path = progress_file()
        with _locked(path):
            try:
                store = _read(path)
            except ProgressError as error:
                if error.errno in (NOT_A_FILE, NOT_OURS):
                    raise  # a FIFO, a device (/dev/zero), a folder, another user's file: not ours to move
                _set_aside(path, error.strerror)
                store = _empty()
            if change(store):  # nothing new (a notebook opened again): no write
                _sweep_temporary(path)
                _write(path, store)
        _last_problem = None
        return True
    except Exception as error:  # noqa: BLE001 -- saving is best-effort, the check's verdict is what matters
        _last_problem = error.strerror if isinstance(error, OSError) and error.strerror else str(error)
        return False


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
        record = {"notebook": set_title[:MAX_TEXT], "exercise": name[:MAX_TEXT], "result": RESULTS[0] if passed
                  else RESULTS[1], "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}  # taken under the lock
        entry = store["sets"].setdefault(record["notebook"], {}).setdefault(
            record["exercise"], {"title": (title or name)[:MAX_TEXT], "passed": False})
        entry["passed"] = entry["passed"] or bool(passed)
        store["records"].append(record)
        return True

    return _update(change)


# --- the table -------------------------------------------------------------------------------

class Progress:
    """The table `progress()` shows: per exercise set, passed k of n and each exercise; problems first."""

    def __init__(self, data: dict, path: Path | None, problems: Sequence[str] = (), records: Sequence[Record] = (),
                 set_aside: Sequence[Path] = ()):
        self.data, self.path, self.problems = data, path, list(problems)
        self.records, self.set_aside = list(records), list(set_aside)

    def passed(self, set_title: str) -> list[str]:
        return [name for name, e in self.data.get(set_title, {}).items() if e.get("passed")]

    @property
    def last_tried(self) -> Record | None:
        return self.records[-1] if self.records else None

    def _notes(self) -> list[str]:
        notes = list(self.problems)
        notes += [f"Set aside, not deleted: {p} (it could not be read; the README's troubleshooting says how to "
                  "recover it)" for p in self.set_aside]
        return notes

    def _table(self) -> list[tuple[str, int, list[tuple[bool, str]]]]:
        return [(set_title, sum(bool(e["passed"]) for e in entries.values()),
                 [(bool(e["passed"]), e.get("title", name)) for name, e in entries.items()])
                for set_title, entries in self.data.items()]

    def __repr__(self) -> str:
        lines = self._notes()
        if not self.data:
            return "\n".join(lines + [f"No checked exercise tried yet ({self.path})."])
        for set_title, done, marks in self._table():
            lines.append(f"{set_title}: passed {done} of {len(marks)}")
            lines += [f"  {'✓' if ok else '·'} {title}" for ok, title in marks]
        if self.last_tried:
            lines.append(f"last tried: {self.last_tried.exercise} ({self.last_tried.notebook}), {self.last_tried.time}")
        return "\n".join(lines + [f"(kept in {self.path}; widgets.progress(reset=True) forgets it)"])

    def _repr_markdown_(self) -> str:
        notes = "".join(f"**{html.escape(n)}**\n\n" for n in self._notes())
        if not self.data:
            return notes + html.escape(f"No checked exercise tried yet ({self.path}).")
        rows = [f"| {html.escape(set_title)} | {done} of {len(marks)} | "
                + " ".join(f"{'✓' if ok else '·'} {html.escape(title)}" for ok, title in marks) + " |"
                for set_title, done, marks in self._table()]
        return (notes + "| exercises | passed | each |\n|---|---|---|\n" + "\n".join(rows)
                + f"\n\nKept in `{self.path}`; `widgets.progress(reset=True)` forgets it.")


def _can_save(path: Path) -> str | None:
    """Why progress cannot be saved at `path` (its folder cannot be made, or the lock file written); None if it can."""
    try:
        with _locked(path):
            return None
    except OSError as error:
        return error.strerror if isinstance(error, ProgressError) else f"{error.strerror} ({error.filename})"


def progress(reset: bool = False) -> Progress:
    """The exercises passed so far; `reset=True` forgets them all first (set-aside files are kept)."""
    if not isinstance(reset, bool):
        raise TypeError(f"reset must be True or False, got {reset!r}")
    try:
        path = progress_file()
    except ProgressError as error:
        return Progress({}, None, [f"Progress cannot be saved: {error.strerror}."])
    problems = []
    if reset:
        try:
            with _locked(path):
                path.unlink(missing_ok=True)
        except OSError as error:
            problems.append(f"Could not reset: {error.strerror or error}.")
    cannot = _can_save(path)
    if cannot:
        problems.append(f"Progress cannot be saved: {cannot}. Checks still work; set LAB_PROGRESS_FILE "
                        "to a file in a writable folder to keep them.")
    elif _last_problem:
        problems.append(f"The last check could not be saved: {_last_problem}.")
    try:
        store = _read(path)
    except ProgressError as error:
        problems.append(f"Progress cannot be read: {error.strerror}." + ("" if error.errno in (NOT_A_FILE, NOT_OURS) else
                        " It is kept: the next check sets it aside, next to it, and starts a new file."))
        store = _empty()
    set_aside = sorted(path.parent.glob(path.name + SET_ASIDE + "*")) if path.parent.is_dir() else []
    return Progress(store["sets"], path, problems, [Record(**r) for r in store["records"]], set_aside)
