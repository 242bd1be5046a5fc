"""The progress store on a shared machine: a file or lock another user put at its path first is
refused (never read as the learner's, never waited on), a link at the lock's name is never followed,
and temporary files a killed write left behind are swept, ours only.

Another user's file: made by `chown` when the tests run as root, else by this process pretending
to be another user (os.geteuid patched), which the store cannot tell apart."""
import json
import os
import subprocess
import sys

import pytest

from widgets.lab import progress as prog

NOBODY = 65534
PLANTED = {"format": 2, "sets": {"Planted": {"win": {"title": "Not yours", "passed": True}}},
           "records": [{"notebook": "Planted", "exercise": "win", "result": "correct", "time": "2026-12-01T00:00:00Z"}]}


@pytest.fixture(autouse=True)
def own_file(tmp_path, monkeypatch):
    path = tmp_path / "progress.json"
    monkeypatch.setenv("LAB_PROGRESS_FILE", str(path))
    monkeypatch.setattr(prog, "_last_problem", None, raising=False)
    return path


def belongs_to_another(path, monkeypatch) -> None:
    """Make `path` another user's: chown as root; otherwise this process stops being its owner."""
    if os.geteuid() == 0:
        os.chown(path, NOBODY, NOBODY)
    else:
        real = os.geteuid()
        monkeypatch.setattr(prog.os, "geteuid", lambda: real + 1)


def test_a_planted_progress_file_is_neither_read_nor_written(own_file, monkeypatch):
    own_file.write_text(json.dumps(PLANTED))
    belongs_to_another(own_file, monkeypatch)
    shown = repr(prog.progress())
    assert "Not yours" not in shown and "belongs to another user" in shown
    with pytest.raises(prog.ProgressError, match="belongs to another user"):
        prog.read_records()
    assert prog.note_check("Mine", "first", True) is False  # not saved, and says why
    assert "belongs to another user" in repr(prog.progress())
    assert json.loads(own_file.read_text()) == PLANTED  # untouched, not set aside
    assert not list(own_file.parent.glob("progress.json.unreadable-*"))


def test_a_lock_another_user_made_is_refused_at_once(own_file, monkeypatch):
    lock = own_file.with_name("progress.json.lock")
    lock.touch()
    belongs_to_another(lock, monkeypatch)

    def never(*_):
        raise AssertionError("waited on another user's lock")

    monkeypatch.setattr(prog.fcntl, "flock", never)  # they could hold it for ever: it must not be tried
    assert prog.note_check("Mine", "first", True) is False
    assert "belongs to another user" in repr(prog.progress())


def test_a_link_at_the_locks_name_is_not_followed(own_file, tmp_path):
    target = tmp_path / "victim.txt"
    target.write_text("keep me")
    own_file.with_name("progress.json.lock").symlink_to(target)
    assert prog.note_check("Mine", "first", True) is False
    assert "link is never followed" in repr(prog.progress())
    assert target.read_text() == "keep me"


@pytest.mark.skipif(os.geteuid() != 0, reason="another user's temporary file needs root to make")
def test_temporary_files_a_killed_write_left_are_swept_ours_only(own_file):
    prog.note_check("Mine", "first", True)
    ours = [own_file.with_name(f"progress.json.left{i}.tmp") for i in range(3)]
    for path in ours:
        path.write_text("half a write")
    theirs = own_file.with_name("progress.json.theirs.tmp")
    theirs.write_text("not ours to delete")
    os.chown(theirs, NOBODY, NOBODY)
    assert prog.note_check("Mine", "second", True)
    assert not any(p.exists() for p in ours) and theirs.exists()
    assert [r.exercise for r in prog.read_records()] == ["first", "second"]


def test_a_write_killed_midway_leaves_nothing_after_the_next(own_file):
    """SIGKILL while the temporary file is written (os.replace never reached), then one more check."""
    child = subprocess.run([sys.executable, "-c", (
        "import os, signal\nfrom widgets.lab import progress\n"
        "progress.os.replace = lambda *a: os.kill(os.getpid(), signal.SIGKILL)\n"  # dies at the replace
        "progress.note_check('Mine', 'first', True)\n")], env=dict(os.environ))
    assert child.returncode == -9
    assert list(own_file.parent.glob("progress.json.*.tmp"))  # what a kill leaves
    assert prog.note_check("Mine", "second", True)
    assert not list(own_file.parent.glob("progress.json.*.tmp"))
