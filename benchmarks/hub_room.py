"""The simulated room: N learners log in to a fresh hub, spawn, run start-here and beginner_2, then three exercises.

    python benchmarks/hub_room.py --learners 10      # make hub-room N=10 (as root)

Writes benchmarks/results/hub_room.json (spawn time, notebook times, peak memory per learner, failures);
whatever happens, it stops all it started and deletes its throw-away users (`tools/hub.py stop --forget`).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import pwd
import secrets
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run as a script: the checkout's hub/ folder
from hub.client import NOTEBOOKS, HubClient, Kernel  # noqa: E402
from hub.room import free_port  # noqa: E402

RUN = ["00_start_here.ipynb", "beginner_2_watch_a_model_learn.ipynb"]
EXERCISES = "beginner_1_carrying_bricks.ipynb"
RESULT = ROOT / "benchmarks" / "results" / "hub_room.json"
TOOL = [sys.executable, str(ROOT / "tools" / "hub.py")]


def checks(i: int) -> str:
    """Learner i's answers: all pass `one_trip`; every other one misses `trips`; all but learner 0 miss `divide_by`."""
    return ("from widgets.lessons.beginner_1 import beginner_exercises\nex = beginner_exercises()\n"
            f"ex.one_trip.check('B')\nex.trips.check({4 if i % 2 == 0 else 144})\nex.divide_by.check({4 if i == 0 else 1})\n")


class Meter(threading.Thread):
    """Samples the resident memory of the hub, its proxy, its services and each learner's processes."""

    def __init__(self, hub_pid: int, uids: dict[int, str], every: float = 0.5):
        super().__init__(daemon=True)
        self.hub_pid, self.uids, self.every = hub_pid, uids, every
        self.peak: dict[str, float] = {}
        self.cpu_s: dict[int, tuple[str, float]] = {}  # pid -> (learner, its CPU seconds when last seen)
        self.done = threading.Event()

    def learner_cpu_s(self) -> dict[str, float]:
        """CPU seconds each learner's processes used (to the last sample, every `every` s)."""
        total: dict[str, float] = {}
        for name, seconds in self.cpu_s.values():
            total[name] = total.get(name, 0.0) + seconds
        return total

    def _keep(self, key: str, mb: float) -> None:
        self.peak[key] = max(self.peak.get(key, 0.0), mb)

    def run(self) -> None:
        while not self.done.wait(self.every):
            totals: dict[str, float] = {}
            for p in psutil.process_iter(["pid", "ppid", "uids", "name", "memory_info", "cpu_times"]):
                info = p.info
                if not info["memory_info"]:
                    continue
                mb = info["memory_info"].rss / 2**20
                if info["pid"] == self.hub_pid:
                    totals["hub"] = mb
                elif info["uids"] and info["uids"].real in self.uids:
                    key = "learner:" + self.uids[info["uids"].real]
                    totals[key] = totals.get(key, 0.0) + mb
                    if info["cpu_times"]:  # a kernel's CPU time is lost when it exits: keep the last reading
                        self.cpu_s[info["pid"]] = (key[8:], info["cpu_times"].user + info["cpu_times"].system)
                elif info["ppid"] == self.hub_pid:  # root's children of the hub: the proxy and the services
                    key = "proxy" if info["name"] == "node" else "services"
                    totals[key] = totals.get(key, 0.0) + mb
            for key, mb in totals.items():
                self._keep(key, mb)


def spread(values: list[float]) -> dict:
    return {"min": round(min(values), 1), "median": round(statistics.median(values), 1), "max": round(max(values), 1),
            "n": len(values)} if values else {"n": 0}


def learner(base: str, name: str, password: str, i: int, failures: list, deadline: float) -> dict:
    """One learner's session: log in, spawn, run the notebooks, try the exercises."""
    out: dict = {"name": name, "notebooks": {}}
    client = HubClient(base, name)
    try:
        if not client.login(password):
            raise RuntimeError("the login was refused")
        client.new_token()
        out["spawn_s"] = round(client.spawn(), 2)
        out["spawned_at"] = time.monotonic()
        for notebook in RUN:
            result = client.run_notebook(f"{NOTEBOOKS}/{notebook}", timeout=max(30.0, deadline - time.monotonic()))
            out["notebooks"][notebook] = result["seconds"]
            if result["error"]:
                failures.append(f"{name}: {notebook}: {result['error']}")
        session, kernel = client.open_notebook(f"{NOTEBOOKS}/{EXERCISES}")
        with Kernel(client, kernel) as k:
            result = k.execute(checks(i), timeout=120)
        client.close_session(session)
        if result["error"]:
            failures.append(f"{name}: exercises: {result['error']}")
    except Exception as error:  # noqa: BLE001 -- a failure is a measurement: recorded, the others go on
        failures.append(f"{name}: {type(error).__name__}: {error}")
    return out


def interrupted(signum, frame) -> None:
    raise KeyboardInterrupt


def left_processes(uids: set[int], hub_pid: int | None) -> list[str]:
    left = []
    for p in psutil.process_iter(["pid", "uids", "ppid", "name"]):
        if (p.info["uids"] and p.info["uids"].real in uids) or (hub_pid and p.info["pid"] == hub_pid):
            left.append(f"{p.info['pid']} {p.info['name']}")
    return left


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--learners", type=int, default=10, help="how many learners (1..40)")
    parser.add_argument("--deadline", type=float, default=1500, help="seconds before the run stops itself")
    parser.add_argument("--output", type=Path, default=RESULT)
    args = parser.parse_args()
    if not 1 <= args.learners <= 40:
        raise SystemExit(f"--learners must be in 1..40, got {args.learners}")
    if os.geteuid() != 0:
        raise SystemExit("the simulated room runs as root: each learner is a system user (make hub-room)")
    signal.signal(signal.SIGTERM, interrupted)  # a kill runs the cleanup below, as Ctrl-C does
    tag = secrets.token_hex(2)
    names = [f"rm{tag}{i:02d}" for i in range(args.learners)]
    password = secrets.token_urlsafe(12)
    state = Path(tempfile.mkdtemp(prefix="lab-hub-room-"))
    port = free_port()
    env = {**os.environ, "LAB_ROOM_PASSWORD": password, "LAB_INSTRUCTOR_PASSWORD": secrets.token_urlsafe(12)}
    t_start, failures, record = time.monotonic(), [], {}
    hub_pid, meter, uids = None, None, {}
    try:
        subprocess.run([*TOOL, "--state", str(state), "start", "--learners", ",".join(names), "--instructor",
                        f"rm{tag}teach", "--port", str(port)], env=env, check=True, stdout=subprocess.DEVNULL)
        info = json.loads((state / "hub.json").read_text())
        hub_pid = info["pid"]
        uids = {pwd.getpwnam(n).pw_uid: n for n in names}
        meter = Meter(hub_pid, uids)
        meter.start()
        deadline = time.monotonic() + args.deadline
        t0 = time.monotonic()
        pool = ThreadPoolExecutor(args.learners)
        try:
            futures = [pool.submit(learner, info["url"], n, password, i, failures, deadline) for i, n in enumerate(names)]
            learners = [f.result(timeout=max(1.0, deadline - time.monotonic())) for f in futures]
        finally:  # on a deadline or a kill, do not wait for the learners: stopping the hub ends their requests
            pool.shutdown(wait=False, cancel_futures=True)
        spawned = [x["spawned_at"] - t0 for x in learners if "spawned_at" in x]
        record = {
            "learners": args.learners,
            "all_spawned_s": round(max(spawned), 1) if len(spawned) == args.learners else None,
            "spawn_s": spread([x["spawn_s"] for x in learners if "spawn_s" in x]),
            "notebook_s": {nb: spread([x["notebooks"][nb] for x in learners if nb in x["notebooks"]]) for nb in RUN},
        }
    except KeyboardInterrupt:
        failures.append("interrupted")
    except Exception as error:  # noqa: BLE001 -- written down, then the room is cleaned up all the same
        failures.append(f"the room: {type(error).__name__}: {error}")
    finally:
        if meter:
            meter.done.set()
            meter.join()
        subprocess.run([*TOOL, "--state", str(state), "stop", "--forget"], check=False, stdout=subprocess.DEVNULL)
        time.sleep(1)
    peaks = meter.peak if meter else {}
    learner_peaks = {k.split(":", 1)[1]: round(v, 1) for k, v in sorted(peaks.items()) if k.startswith("learner:")}
    record.update({
        "command": f"python benchmarks/hub_room.py --learners {args.learners}",
        "measured_on": time.strftime("%Y-%m-%d"),
        "machine": f"{platform.machine()}, {psutil.cpu_count()} cores, {round(psutil.virtual_memory().total / 2**30)} GiB",
        "load_average_1_5_15_end": [round(x, 2) for x in os.getloadavg()],
        "peak_mb": {"hub": round(peaks.get("hub", 0), 1), "proxy": round(peaks.get("proxy", 0), 1),
                    "services": round(peaks.get("services", 0), 1), "learner": spread(list(learner_peaks.values())),
                    "each_learner": learner_peaks},
        "learner_cpu_s": spread(list(meter.learner_cpu_s().values()) if meter else []),
        "failures": failures,
        "left_processes": left_processes(set(uids), hub_pid),
        "wall_s": round(time.monotonic() - t_start, 1),
    })
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(record, indent=2) + "\n")
    print(json.dumps(record, indent=2))
    if failures or record["left_processes"]:
        sys.exit(1)


if __name__ == "__main__":
    main()
