"""progress(): registered sets are listed, passes stick, the file survives a new process, reset is one call;
and the store loses nothing: a corrupt file is never overwritten; kernels writing at once, or killed
mid-write, lose no pass and leave no temporary file; no home folder never breaks a check."""
import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from filelock import FileLock

import widgets
from widgets.lab import progress as prog

ROOT = Path(__file__).resolve().parents[2]


def passed(set_title: str) -> list[str]:
    return [name for name, e in prog.progress().data.get(set_title, {}).items() if e["passed"]]


@pytest.fixture(autouse=True)
def own_file(tmp_path, monkeypatch):
    path = tmp_path / "lab" / "progress.json"
    monkeypatch.setenv("LAB_PROGRESS_FILE", str(path))
    monkeypatch.setattr(prog, "_last_problem", None, raising=False)
    return path


def test_nothing_tried_yet(own_file):
    assert repr(widgets.progress()).startswith("No checked exercise tried yet")
    assert prog.read_records() == [] and not own_file.exists()


def test_sets_are_listed_and_passes_stick(own_file):
    prog.note_exercises("Proving the equivalence", [("ratio", "Break the demo on purpose"), ("sixteen", "Sixteen from twos")])
    prog.note_exercises("The bug gallery", [("sum_reduction", "Scale a summed loss")])
    prog.note_check("Proving the equivalence", "ratio", False)
    assert passed("Proving the equivalence") == []
    prog.note_check("Proving the equivalence", "ratio", True)
    prog.note_check("Proving the equivalence", "ratio", False)  # a later wrong answer keeps the pass
    prog.note_exercises("Proving the equivalence", [("ratio", "Break the demo on purpose")])  # re-running the notebook too
    table = prog.progress()
    assert passed("Proving the equivalence") == ["ratio"]
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
    assert prog.progress().records[-1] == records[-1]
    assert prog.read_records(own_file.parent / "nobody.json") == []


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


@pytest.mark.parametrize("content", [
    "{not json", '{"format": 2, "sets": {"S": {"e": {"title": "E", "passed": tr', "\x00" * 100, '[1, 2]',
    '{"format": 2, "sets": {}, "records": [{"x": 1}]}', '{"format": 3, "sets": {}, "records": []}',
    '{"format": 2, "sets": {"a": 5}, "records": []}', " " * (prog.MAX_BYTES + 1),
], ids=["corrupt", "truncated", "zeros", "a list", "bad record", "newer format", "bad set", "too large"])
def test_a_corrupt_file_is_said_and_never_overwritten(own_file, content):
    own_file.parent.mkdir()
    own_file.write_text(content)
    from widgets.exercises.toolkit import Exercise, ExerciseSet, correct, incorrect

    exercise = Exercise("two", "Say two", "What is 1 + 1?", lambda a: correct("yes") if a == 2 else incorrect("no"),
                        hints=["count"], solution="2")
    ExerciseSet("A tiny set", [exercise])
    assert exercise.check(2).correct  # the check cell works
    assert own_file.read_text() == content
    text = repr(prog.progress())
    assert "Progress cannot be read" in text and "reset=True" in text, text
    assert "The last check could not be saved" in text
    assert repr(prog.progress(reset=True)).startswith("No checked exercise tried yet")
    assert prog.note_check("S", "e", True) and passed("S") == ["e"]


def test_the_store_stays_bounded(own_file, monkeypatch):
    monkeypatch.setattr(prog, "MAX_RECORDS", 5)
    prog.note_check("S", "e", True)
    for i in range(8):
        prog.note_check("S", f"e{i}", i == 7)
    assert [r.exercise for r in prog.read_records()] == ["e3", "e4", "e5", "e6", "e7"]  # the latest kept
    assert passed("S") == ["e", "e7"]  # passes are kept whatever their age
    assert prog.note_check("S" * 10_000, "e" * 10_000, True) is True
    assert max(len(name) for name in prog.progress().data) == prog.MAX_TEXT


def test_the_folder_and_files_are_the_learners_alone(own_file):
    """On a shared machine no other user may read the file, or plant one in its folder."""
    prog.note_check("S", "e", True)
    assert stat.S_IMODE(own_file.parent.stat().st_mode) == 0o700
    for path in own_file.parent.iterdir():
        assert stat.S_IMODE(path.stat().st_mode) & 0o077 == 0, path


def test_a_link_planted_at_the_temporary_name_is_not_written_through(own_file, tmp_path):
    """A link named progress.json.tmp must not carry the write to the file it points at."""
    target = tmp_path / "another_file"
    target.write_text("theirs")
    own_file.parent.mkdir(mode=0o700, parents=True)
    own_file.with_name("progress.json.tmp").symlink_to(target)
    assert prog.note_check("S", "e", True)
    assert target.read_text() == "theirs"
    assert not own_file.is_symlink() and json.loads(own_file.read_text())["sets"]["S"]["e"]["passed"]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs are POSIX")
def test_a_fifo_at_the_path_is_refused_without_waiting(own_file):
    own_file.parent.mkdir(mode=0o700)
    os.mkfifo(own_file)
    script = "from widgets.lab import progress as p; print(p.note_check('S', 'e', True), repr(p.progress()))"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.stdout.startswith("False") and "is not a regular file" in done.stdout, done.stdout + done.stderr


def test_reset_takes_a_boolean():
    with pytest.raises(TypeError, match="reset"):
        prog.progress(reset="no")


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


def test_a_lock_held_too_long_gives_up_saving_and_says_so(own_file):
    own_file.parent.mkdir(exist_ok=True)
    held = FileLock(own_file.with_name(own_file.name + ".lock"), thread_local=False)
    with held:  # filelock: a lock held by another process, as a stuck kernel would
        code = ("from widgets.lab import progress as p; p.LOCK_TIMEOUT_S = 0.2\n"
                "print(p.note_check('S', 'e', True)); print(repr(p.progress()))")
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120).stdout
        assert out.startswith("False\n") and "locked by another kernel" in out, out
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
    return len(passed("Race")), len(prog.read_records())


def test_kernels_checking_at_once_lose_nothing(own_file):
    assert race(4, 40) == (160, 160)


STEADY = """
import sys
from widgets.lab import progress as p
sys.exit(sum(not p.note_check("Steady", f"e{i}", True) for i in range(int(sys.argv[1]))))
"""
KILLED = """
from widgets.lab import progress as p
i = 0
while True:
    p.note_check("Killed", f"k{i}", True)
    if i == 0:
        print("writing", flush=True)
    i += 1
"""


def test_writers_killed_mid_write_beside_a_steady_one_leave_a_whole_file_and_no_temporary(own_file):
    steady = subprocess.Popen([sys.executable, "-c", STEADY, "60"])
    for n in range(20):
        killed = subprocess.Popen([sys.executable, "-c", KILLED], stdout=subprocess.PIPE, text=True)
        assert killed.stdout.readline() == "writing\n"
        time.sleep(0.003 * n)  # it writes in a tight loop: killed at some point of a write
        killed.kill()
        killed.wait()
        killed.stdout.close()
    assert steady.wait(timeout=300) == 0  # every steady check saved
    assert prog.note_check("After", "e", True)
    records = prog.read_records()  # whole: it parses
    assert [r.exercise for r in records if r.notebook == "Steady"] == [f"e{i}" for i in range(60)]
    assert sorted(p.name for p in own_file.parent.iterdir()) == ["progress.json", "progress.json.lock"]


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


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="another user's file needs root to make")
def test_a_file_another_user_planted_is_neither_read_nor_written(own_file):
    own_file.parent.mkdir()
    planted = {"format": 2, "sets": {"Planted": {"win": {"title": "Not yours", "passed": True}}}, "records": []}
    own_file.write_text(json.dumps(planted))
    os.chown(own_file, 65534, 65534)
    assert prog.note_check("Mine", "first", True) is False
    shown = repr(prog.progress())
    assert "Not yours" not in shown and "belongs to another user" in shown
    assert json.loads(own_file.read_text()) == planted
