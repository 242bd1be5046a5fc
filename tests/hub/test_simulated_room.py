"""The simulated room (benchmarks/hub_room.py) ends by itself and, killed or not, leaves nothing
behind; the Kubernetes sizing (hub/sizing.py) follows from its measurements."""
from __future__ import annotations

import json
import pwd
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil

from hub import sizing

ROOT = Path(__file__).resolve().parents[2]
BENCHMARK = [sys.executable, str(ROOT / "benchmarks" / "hub_room.py")]


def no_user(names) -> bool:
    for name in names:
        try:
            pwd.getpwnam(name)
            return False
        except KeyError:
            pass
    return True


def room_states() -> set[Path]:
    return set(Path("/tmp").glob("lab-hub-room-*"))


def test_one_learner_runs_the_room_and_nothing_is_left(tmp_path):
    out = tmp_path / "hub_room.json"
    run = subprocess.run([*BENCHMARK, "--learners", "1", "--output", str(out)], capture_output=True, text=True,
                         timeout=600)
    record = json.loads(out.read_text())
    assert run.returncode == 0, record["failures"]
    assert record["failures"] == [] and record["left_processes"] == []
    assert record["all_spawned_s"] > 0 and set(record["notebook_s"]) == {"00_start_here.ipynb",
                                                                        "beginner_2_watch_a_model_learn.ipynb"}
    assert record["peak_mb"]["hub"] > 0 and record["peak_mb"]["proxy"] > 0 and record["peak_mb"]["learner"]["n"] == 1
    assert no_user(record["peak_mb"]["each_learner"])


def test_a_killed_room_still_stops_everything(tmp_path):
    out, before = tmp_path / "hub_room.json", room_states()
    room = subprocess.Popen([*BENCHMARK, "--learners", "1", "--output", str(out)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 180
    while not any((p / "hub.json").exists() for p in room_states() - before):  # the hub is up: learners log in
        assert room.poll() is None and time.monotonic() < deadline
        time.sleep(0.5)
    state = next(iter(room_states() - before))
    time.sleep(3)
    room.send_signal(signal.SIGTERM)
    assert room.wait(120) == 1
    record = json.loads(out.read_text())
    assert "interrupted" in record["failures"] and record["left_processes"] == []
    assert not state.exists()
    marker = f"LAB_HUB_STATE={state}"
    for p in psutil.process_iter():
        try:
            assert marker not in "\n".join(f"{k}={v}" for k, v in p.environ().items())
        except psutil.Error:
            pass


def test_the_sizing_follows_from_the_measurements():
    room = {"command": "python benchmarks/hub_room.py --learners 10", "measured_on": "2026-12-01", "learners": 10,
            "machine": "x86_64, 2 cores, 24 GiB", "failures": [], "all_spawned_s": 30.0,
            "notebook_s": {"00_start_here.ipynb": {"median": 10.0}, "beginner_2_watch_a_model_learn.ipynb": {"median": 30.0}},
            "learner_cpu_s": {"median": 20.0},
            "peak_mb": {"hub": 150.0, "proxy": 60.0, "services": 100.0,
                        "learner": {"min": 400.0, "median": 500.0, "max": 600.0, "n": 10}}}
    s = sizing.sizing(room, heaviest_mb=900.0)
    assert s["guarantee_mb"] == 512  # 500 MB rounded up to 128 MB
    assert s["limit_mb"] == 1280  # max(600, 900) x 1.25 = 1125, rounded up to 256 MB
    assert s["running_cores"] == 0.5  # 20 CPU s over 40 s of running cells
    for label, row in s["nodes"].items():
        assert row["30"] <= row["100"] <= row["300"] and row["learners_per_node"] * row["300"] >= 300, label
    text = sizing.section(room, 900.0)
    assert text.startswith(sizing.BEGIN) and text.endswith(sizing.END) and "guarantee: 512M" in text
