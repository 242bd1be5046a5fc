"""progress(): registered sets are listed, passes stick, the file survives a new process, reset is one call;
and the store loses nothing: an unreadable or corrupt file is set aside, never overwritten; kernels
writing at once lose no pass; no home folder, a FIFO or a device never break (or hang) a check."""
import errno
import fcntl
import json
import os
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

import widgets
from widgets.lab import progress as prog

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def own_file(tmp_path, monkeypatch):
    path = tmp_path / "progress.json"
    monkeypatch.setenv("LAB_PROGRESS_FILE", str(path))
    monkeypatch.setattr(prog, "_last_problem", None, raising=False)
    return path


@contextmanager
def at_most(seconds: int):
    """Fail instead of hanging (a FIFO opened for reading waits for a writer forever)."""
    def alarm(*_):
        raise TimeoutError(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def set_aside(path: Path) -> list[Path]:
    return sorted(path.parent.glob(path.name + ".unreadable-*"))


def test_nothing_tried_yet(own_file):
    assert repr(widgets.progress()).startswith("No checked exercise tried yet")
    assert prog.read_records() == [] and not own_file.exists()


def test_sets_are_listed_and_passes_stick(own_file):
    prog.note_exercises("Proving the equivalence", [("ratio", "Break the demo on purpose"), ("sixteen", "Sixteen from twos")])
    prog.note_exercises("The bug gallery", [("sum_reduction", "Scale a summed loss")])
    prog.note_check("Proving the equivalence", "ratio", False)
    assert prog.progress().passed("Proving the equivalence") == []
    prog.note_check("Proving the equivalence", "ratio", True)
    prog.note_check("Proving the equivalence", "ratio", False)  # a later wrong answer keeps the pass
    prog.note_exercises("Proving the equivalence", [("ratio", "Break the demo on purpose")])  # re-running the notebook too
    table = prog.progress()
    assert table.passed("Proving the equivalence") == ["ratio"]
    text = repr(table)
    assert "Proving the equivalence: passed 1 of 2" in text and "✓ Break the demo on purpose" in text
    assert "The bug gallery: passed 0 of 1" in text and "· Scale a summed loss" in text
    assert "last tried: ratio (Proving the equivalence)" in text
    assert "| Proving the equivalence | 1 of 2 |" in table._repr_markdown_()
    assert json.loads(own_file.read_text())["sets"]["Proving the equivalence"]["ratio"]["passed"] is True


def test_each_check_is_a_record_a_room_view_reads(own_file):
    prog.note_exercises("The training loop", [("boundary", "Name the boundary")])
    assert prog.read_records(own_file) == []  # registering a set is not a check
    prog.note_check("The training loop", "boundary", False)
    prog.note_check("The training loop", "boundary", True)
    records = prog.read_records(str(own_file))
    assert [(r.notebook, r.exercise, r.result) for r in records] == [
        ("The training loop", "boundary", "incorrect"), ("The training loop", "boundary", "correct")]
    assert all(time.strptime(r.time, "%Y-%m-%dT%H:%M:%SZ") for r in records)
    assert prog.progress().last_tried == records[-1]
    assert prog.read_records(own_file.parent / "nobody.json") == []
    with pytest.raises(TypeError, match="path"):
        prog.read_records(5)
    with pytest.raises(TypeError, match="reset"):
        prog.progress(reset="yes")


def test_opening_a_notebook_again_writes_nothing(own_file):
    prog.note_exercises("S", [("e", "E")])
    before = own_file.stat().st_mtime_ns, own_file.stat().st_ino
    assert prog.note_exercises("S", [("e", "E")]) is True
    assert (own_file.stat().st_mtime_ns, own_file.stat().st_ino) == before


def test_the_file_is_read_by_a_new_process_and_reset_is_one_call(own_file):
    prog.note_check("The training loop", "boundary", True, title="Name the boundary")
    out = subprocess.run([sys.executable, "-c", "import widgets; print(repr(widgets.progress()))"],
                         capture_output=True, text=True, env={**os.environ}, check=True).stdout
    assert "The training loop: passed 1 of 1" in out
    assert repr(widgets.progress(reset=True)).startswith("No checked exercise tried yet")
    assert not own_file.exists()


def test_a_file_of_the_first_format_is_read_and_kept(own_file):
    own_file.write_text(json.dumps({"S": {"e": {"title": "E", "passed": True}, "f": {"title": "F", "passed": False}}}))
    assert prog.progress().passed("S") == ["e"]
    assert prog.note_check("S", "f", True) is True
    assert prog.progress().passed("S") == ["e", "f"] and set_aside(own_file) == []


@pytest.mark.parametrize("content", [
    "{not json", '{"S": {"e": {"title": "E", "passed": tr', "\x00" * 100, '[1, 2]', '{"S": 5}',
    '{"S": {"e": {"title": "E", "passed": "yes"}}}', '{"S": {"e": []}}', '{"format": 2, "sets": {}, "records": [{"x": 1}]}',
    '{"format": 3, "sets": {}, "records": []}', "[" * 100_000,
], ids=["corrupt", "truncated", "zeros", "a list", "a number", "passed as text", "entry a list", "bad record",
        "newer format", "deep"])
def test_a_corrupt_or_wrong_shaped_file_is_set_aside_never_overwritten(own_file, content):
    """Kept byte for byte next to the file; the check still works and starts a new file; the table says so."""
    own_file.write_text(content)
    assert "It is kept" in repr(prog.progress())  # reading alone never moves or writes it
    assert own_file.read_text() == content
    with pytest.warns(prog.ProgressWarning, match="kept as .*unreadable-"):
        assert prog.note_exercises("S", [("e", "E")]) is True  # opening a notebook
    [kept] = set_aside(own_file)
    assert kept.read_text() == content
    assert prog.note_check("S", "e", True) is True and prog.progress().passed("S") == ["e"]
    text = repr(prog.progress())
    assert f"Set aside, not deleted: {kept}" in text and "S: passed 1 of 1" in text
    assert set_aside(own_file) == [kept]


def test_a_wrong_shaped_file_never_crashes_an_exercise_cell(own_file):
    from widgets.exercises.toolkit import Exercise, ExerciseSet, correct, incorrect

    own_file.write_text('{"A tiny set": {"two": 5}}')
    exercise = Exercise("two", "Say two", "What is 1 + 1?", lambda a: correct("yes") if a == 2 else incorrect("no"),
                        hints=["count"], solution="2")
    with pytest.warns(prog.ProgressWarning):
        ExerciseSet("A tiny set", [exercise])
    assert exercise.check(2).correct
    assert prog.progress().passed("A tiny set") == ["two"]


def test_an_unreadable_file_is_set_aside_not_replaced(own_file, monkeypatch):
    """A read that fails (a transient NFS error, here injected: as root, permissions do not stop a read)."""
    own_file.write_text(json.dumps({"S": {"e": {"title": "E", "passed": True}}}))

    def failing_read(fd, n):
        raise OSError(errno.EIO, "Input/output error")

    with monkeypatch.context() as patched:
        patched.setattr(prog.os, "read", failing_read)
        assert "Input/output error" in repr(prog.progress())
        with pytest.warns(prog.ProgressWarning, match="cannot be read"):
            assert prog.note_check("S", "f", True) is True
    [kept] = set_aside(own_file)
    assert json.loads(kept.read_text())["S"]["e"]["passed"] is True  # the earned pass is still there
    assert prog.progress().passed("S") == ["f"]


def test_a_huge_file_is_set_aside_unread_and_the_store_stays_bounded(own_file, monkeypatch):
    with open(own_file, "wb") as f:
        f.truncate(89 * 2**20)  # sparse: 89 MB that cost nothing to make
    reads = []
    monkeypatch.setattr(prog.os, "read", lambda fd, n, read=os.read: reads.append(n) or read(fd, n))
    start = time.perf_counter()
    with pytest.warns(prog.ProgressWarning, match="89 MB"):
        assert prog.note_check("S", "e", True) is True
    assert reads == [] and time.perf_counter() - start < 5
    assert [p.stat().st_size for p in set_aside(own_file)] == [89 * 2**20]
    monkeypatch.setattr(prog, "MAX_RECORDS", 5)
    for i in range(8):
        prog.note_check("S", f"e{i}", i == 7)
    assert [r.exercise for r in prog.read_records()] == ["e3", "e4", "e5", "e6", "e7"]  # the latest kept
    assert prog.progress().passed("S") == ["e", "e7"]  # passes are kept whatever their age
    assert prog.note_check("S" * 10_000, "e" * 10_000, True) is True
    assert max(len(name) for name in prog.progress().data) == prog.MAX_TEXT


def test_a_fifo_at_the_path_neither_hangs_nor_is_moved(own_file):
    os.mkfifo(own_file)
    with at_most(10):
        assert prog.note_check("S", "e", True) is False
        text = repr(prog.progress())
    assert "not a regular file" in text and "The last check could not be saved" in text
    assert own_file.is_fifo() and set_aside(own_file) == []


def test_a_device_at_the_path_is_never_read(own_file):
    """/dev/zero would fill the memory: run in a child with 1 GB of address space, and time-limited."""
    own_file.symlink_to("/dev/zero")
    code = ("import resource; resource.setrlimit(resource.RLIMIT_AS, (2**30, 2**30))\n"
            "from widgets.lab import progress as p\n"
            "print(p.note_check('S', 'e', True)); print(repr(p.progress()))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "LAB_PROGRESS_FILE": str(own_file)})
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.startswith("False\n") and "is not a regular file" in out.stdout
    assert os.readlink(own_file) == "/dev/zero"


def test_no_home_and_an_unknown_user_break_no_check():
    """Importing works, checks work, and progress() says why nothing is kept (a container's random uid:
    no $HOME, and no passwd entry, simulated where Python looks it up)."""
    code = ("import pwd\n"
            "def unknown(uid): raise KeyError(f'getpwuid(): uid not found: {uid}')\n"
            "pwd.getpwuid = unknown\n"
            "from widgets.exercises.toolkit import Exercise, ExerciseSet, correct\n"
            "e = Exercise('two', 'Say two', 'What?', lambda a: correct('yes'), hints=['h'], solution='2')\n"
            "ExerciseSet('S', [e]); print(e.check(2).correct)\n"
            "import widgets; print(repr(widgets.progress()))")
    env = {k: v for k, v in os.environ.items() if k not in ("HOME", "LAB_PROGRESS_FILE")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.startswith("True\nProgress cannot be saved: there is no home folder"), out.stdout


@pytest.mark.parametrize("home", ["/sys", "a file"])
def test_a_read_only_home_is_said_by_progress_and_breaks_no_check(home, tmp_path, monkeypatch):
    if home == "a file":
        home = tmp_path / "a-file"
        home.write_text("")
    elif os.access(home, os.W_OK) and not Path(home, ".gradient-accumulation-lab").exists():
        try:
            Path(home, ".gradient-accumulation-lab").mkdir()
        except OSError:
            pass
        else:
            pytest.skip("/sys is writable here")
    monkeypatch.delenv("LAB_PROGRESS_FILE")
    monkeypatch.setenv("HOME", str(home))
    assert prog.note_check("S", "e", True) is False
    text = repr(prog.progress())
    assert text.startswith("Progress cannot be saved: ") and "LAB_PROGRESS_FILE" in text, text


def test_a_lock_held_too_long_gives_up_saving_and_says_so(own_file, monkeypatch):
    monkeypatch.setattr(prog, "LOCK_TIMEOUT_S", 0.2)
    own_file.parent.mkdir(exist_ok=True)
    with open(own_file.with_name(own_file.name + ".lock"), "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        assert prog.note_check("S", "e", True) is False
        assert "locked by another kernel" in repr(prog.progress())
    assert prog.note_check("S", "e", True) is True
    assert "could not be saved" not in repr(prog.progress())


WRITER = """
import sys
from widgets.lab import progress as p
me, n = sys.argv[1], int(sys.argv[2])
sys.exit(sum(not p.note_check("Race", f"{me}-{i}", True) for i in range(n)))
"""


def race(writers: int, checks: int) -> tuple[int, int]:
    """(passes, records) after `writers` processes each pass `checks` exercises of their own, all at once."""
    children = [subprocess.Popen([sys.executable, "-c", WRITER, str(w), str(checks)]) for w in range(writers)]
    assert [c.wait(timeout=300) for c in children] == [0] * writers  # every check was saved
    return len(prog.progress().passed("Race")), len(prog.read_records())


def test_kernels_checking_at_once_lose_nothing(own_file):
    assert race(4, 40) == (160, 160)
    assert set_aside(own_file) == []


def test_checking_an_exercise_records_it(own_file):
    """The toolkit reports to progress: a set is listed when built, a pass is kept once earned."""
    from widgets.exercises.toolkit import Exercise, ExerciseSet, correct, incorrect

    exercise = Exercise("two", "Say two", "What is 1 + 1?", lambda a: correct("yes") if a == 2 else incorrect("no"),
                        hints=["count"], solution="2")
    ExerciseSet("A tiny set", [exercise])
    exercise.check(3)
    exercise.check(2)
    exercise.check(3)
    data = json.loads(own_file.read_text())
    assert data["sets"]["A tiny set"]["two"]["passed"] is True
    assert [r["result"] for r in data["records"]] == ["incorrect", "correct", "incorrect"]
