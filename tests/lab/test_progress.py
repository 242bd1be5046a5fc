"""progress(): registered sets are listed, passes stick, the file survives a new process, reset is one call."""
import json
import os
import subprocess
import sys

import pytest

import widgets
from widgets.lab import progress as prog


@pytest.fixture(autouse=True)
def own_file(tmp_path, monkeypatch):
    path = tmp_path / "progress.json"
    monkeypatch.setenv("LAB_PROGRESS_FILE", str(path))
    return path


def test_nothing_tried_yet(own_file):
    assert repr(widgets.progress()).startswith("No checked exercise tried yet")


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
    assert "| Proving the equivalence | 1 of 2 |" in table._repr_markdown_()
    assert json.loads(own_file.read_text())["Proving the equivalence"]["ratio"]["passed"] is True


def test_the_file_is_read_by_a_new_process_and_reset_is_one_call(own_file):
    prog.note_check("The training loop", "boundary", True, title="Name the boundary")
    out = subprocess.run([sys.executable, "-c", "import widgets; print(repr(widgets.progress()))"],
                         capture_output=True, text=True, env={**os.environ}, check=True).stdout
    assert "The training loop: passed 1 of 1" in out
    assert repr(widgets.progress(reset=True)).startswith("No checked exercise tried yet")
    assert not own_file.exists()


def test_an_unwritable_or_broken_file_never_breaks_a_check(own_file, tmp_path, monkeypatch):
    own_file.write_text("{not json")
    assert prog.note_check("S", "e", True) is True  # a broken file is started afresh
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    monkeypatch.setenv("LAB_PROGRESS_FILE", str(blocked / "progress.json"))  # its folder is a file
    assert prog.note_check("S", "e", True) is False
    assert repr(prog.progress()).startswith("No checked exercise tried yet")


def test_checking_an_exercise_records_it(tmp_path, monkeypatch):
    """The toolkit reports to progress: a set is listed when built, a pass is kept once earned."""
    import json

    from widgets.exercises.toolkit import Exercise, ExerciseSet, correct, incorrect

    monkeypatch.setenv("LAB_PROGRESS_FILE", str(tmp_path / "progress.json"))
    exercise = Exercise("two", "Say two", "What is 1 + 1?", lambda a: correct("yes") if a == 2 else incorrect("no"),
                        hints=["count"], solution="2")
    ExerciseSet("A tiny set", [exercise])
    exercise.check(3)
    exercise.check(2)
    exercise.check(3)
    data = json.loads((tmp_path / "progress.json").read_text())
    assert data["A tiny set"]["two"]["passed"] is True
