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
    run = subprocess.run([*BENCHMARK, "--learners", "1", "--minutes", "0.25", "--output", str(out)],
                         capture_output=True, text=True, timeout=600)
    record = json.loads(out.read_text())
    assert run.returncode == 0, record["failures"]
    assert record["failures"] == [] and record["left_processes"] == []
    assert record["all_spawned_s"] > 0 and set(record["notebook_s"]) == {"beginner_1_carrying_bricks.ipynb",
                                                                        "beginner_2_watch_a_model_learn.ipynb"}
    assert record["peak_mb"]["hub"] > 0 and record["peak_mb"]["proxy"] > 0 and record["peak_mb"]["learner"]["n"] == 1
    # 15 s at one change every 2-4 s: the kernel answered each, most with a new picture
    assert 3 <= record["changes"] <= 8 and record["with_a_picture"] >= record["changes"] // 2
    assert 0 < record["latency_ms"]["median"] <= record["latency_ms"]["p95"] and record["cpu_ms_per_change"]["n"] == 1
    assert 0 < record["pss_mb"]["max"] <= record["peak_mb"]["learner"]["max"] and record["load_1min"]["samples"] > 0
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
    room = {"command": "python benchmarks/hub_room.py --learners 10 --minutes 5", "measured_on": "2026-12-01",
            "learners": 10, "machine": "x86_64, 2 cores, 24 GiB", "failures": [], "paced_minutes": 5, "changes": 1000,
            "latency_ms": {"median": 60.0, "p95": 150.0}, "learner_p95_ms": {"max": 180.0},
            "cpu_ms_per_change": {"median": 40.0}, "load_1min": {"mean": 1.5, "max": 2.0}, "left_processes": [],
            "pss_mb": {"min": 300.0, "median": 320.0, "max": 340.0},
            "peak_mb": {"hub": 150.0, "proxy": 60.0, "services": 100.0,
                        "learner": {"min": 400.0, "median": 500.0, "max": 600.0, "n": 10}}}
    # a pod is one learner: its memory is the room's measured with a fork server per learner
    pods = {**room, "pss_mb": {"min": 480.0, "median": 500.0, "max": 540.0}}
    s = sizing.sizing(room, heaviest_mb=600.0, pods=pods)
    assert s["guarantee_mb"] == 512  # the pods' median PSS, 500 MB, rounded up to 128 MB
    assert s["limit_mb"] == 768  # max(540, 600) x 1.25 = 750, rounded up to 256 MB
    assert s["cpu_guarantee"] == 0.05  # 40 ms of CPU every 3 s on average: 0.013 of a core, at least 0.05
    for label, row in s["nodes"].items():
        assert row["30"] <= row["100"] <= row["300"] and row["learners_per_node"] * row["300"] >= 300, label
    text = sizing.section([room], 600.0, pods)
    assert text.startswith(sizing.BEGIN) and text.endswith(sizing.END) and "guarantee: 512M" in text
