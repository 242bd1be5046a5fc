"""The instructor kit is computed: make_plans.py writes every plan from the benchmark results, and
each plan fits its length."""
import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_make_plans_writes_plans_that_fit_and_room_numbers_from_the_results(tmp_path):
    subprocess.run([sys.executable, str(ROOT / "instructor" / "make_plans.py"), "--out", str(tmp_path)],
                   check=True, capture_output=True, text=True, timeout=600)
    plans = (tmp_path / "plans.md").read_text()
    for audience in ("Newcomers", "Engineers", "Researchers"):
        for length in (60, 90, 180):
            section = re.search(rf"## {audience}, {length} minutes\n(.*?)(?=\n## |\Z)", plans, re.S)[1]
            minutes = [int(m) for m in re.findall(r"^\| (\d+) \|", section, re.M)]
            assert minutes and sum(minutes) <= length, (audience, length, minutes)
            assert "Slack:" in section
    room = (tmp_path / "room_setup.md").read_text()
    results = ROOT / "benchmarks" / "results" / "classroom.json"
    if results.exists():
        measured = json.loads(results.read_text())
        assert f"an idle JupyterLab server holds {measured['lab_server_idle_mb']} MB" in room
        for run in measured["rooms"]:
            assert f"| {run['kernels']} | {run['wall_s']} s |" in room
    notes = (tmp_path / "notebooks.md").read_text()
    assert "**Objective.**" in notes and "**Misconceptions it targets.**" in notes


def test_committed_plans_are_what_make_plans_writes_now(tmp_path):
    """The plans cite cell numbers and run times: after a notebook or the benchmark changes, they
    must be written again (`make plans`), or an instructor reads "before cell 36" for a moved cell."""
    subprocess.run([sys.executable, str(ROOT / "instructor" / "make_plans.py"), "--out", str(tmp_path)],
                   check=True, capture_output=True, text=True, timeout=600)
    for name in ("plans.md", "notebooks.md", "room_setup.md"):
        assert (tmp_path / name).read_text() == (ROOT / "instructor" / name).read_text(), \
            f"instructor/{name} is out of date: run `make plans` and commit it"
