"""The room as a class behaves: N learners log in to a fresh hub, spawn, open beginner_1 and beginner_2 and
run them, then each changes a widget setting every 2-4 s (seeded) for some minutes, as a learner does.

    python benchmarks/hub_room.py --learners 40      # make hub-room N=40 (as root)

Each learner is a client of their own kernels over the kernel websocket, as a browser is: it sets a control
(a slider, a dropdown, a checkbox of the bricks or the explorer) and times the kernel's answer: until the new
picture's message arrives (a PNG for the Image; loopback, so about what leaves the kernel), and until the
kernel is idle again. Recorded: every change's latency, each learner's memory (PSS, all their processes)
and CPU milliseconds per change, and the load, into benchmarks/results/hub_room_<N>.json (a file per room
size); whatever happens, it stops all it started and deletes its throw-away users (`tools/hub.py stop --forget`).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import pwd
import random
import secrets
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run as a script: the checkout's hub/ folder
from hub.client import NOTEBOOKS, HubClient, Kernel, new_setting  # noqa: E402
from hub.room import free_port  # noqa: E402
from hub.sizing import PACE_S  # noqa: E402 -- a learner's pause between two changes, which the sizing reads too

RUN = ["beginner_1_carrying_bricks.ipynb", "beginner_2_watch_a_model_learn.ipynb"]
RESULTS = ROOT / "benchmarks" / "results"
TOOL = [sys.executable, str(ROOT / "tools" / "hub.py")]


class Meter(threading.Thread):
    """Samples the memory of the hub, its proxy, its services and each learner's processes (resident, and PSS:
    shared pages split among the processes that map them), and the load, every `every` seconds."""

    def __init__(self, hub_pid: int, uids: dict[int, str], every: float = 2.0):
        super().__init__(daemon=True)
        self.hub_pid, self.uids, self.every = hub_pid, uids, every
        self.peak: dict[str, float] = {}  # key -> MB (resident; learners' PSS under "pss:<name>")
        self.at_peak: dict[str, dict[str, float]] = {}  # learner -> PSS by kind of process at their peak
        self.load: list[float] = []  # the 1-minute load average at each sample while learners change settings
        self.pacing = threading.Event()
        self.done = threading.Event()

    def _keep(self, key: str, mb: float) -> None:
        self.peak[key] = max(self.peak.get(key, 0.0), mb)

    def run(self) -> None:
        while not self.done.wait(self.every):
            totals: dict[str, float] = {}
            for p in psutil.process_iter(["pid", "ppid", "uids", "name", "memory_info", "cmdline"]):
                info = p.info
                if not info["memory_info"]:
                    continue
                mb = info["memory_info"].rss / 2**20
                if info["pid"] == self.hub_pid:
                    totals["hub"] = mb
                elif info["uids"] and info["uids"].real in self.uids:
                    name = self.uids[info["uids"].real]
                    totals["learner:" + name] = totals.get("learner:" + name, 0.0) + mb
                    try:
                        pss = p.memory_full_info().pss / 2**20
                        kind = f"kind:{name}:{process_kind(p)}"
                    except psutil.Error:  # it ended between the two reads
                        continue
                    totals["pss:" + name] = totals.get("pss:" + name, 0.0) + pss
                    totals[kind] = totals.get(kind, 0.0) + pss
                elif info["ppid"] == self.hub_pid and "--room" in (info["cmdline"] or []):
                    try:  # the room's fork server (hub/fork_kernels.py): PSS, its pages are every learner's too
                        totals["room fork server"] = p.memory_full_info().pss / 2**20
                    except psutil.Error:
                        pass
                elif info["ppid"] == self.hub_pid:  # root's children of the hub: the proxy and the services
                    key = "proxy" if info["name"] == "node" else "services"
                    totals[key] = totals.get(key, 0.0) + mb
            for name in self.uids.values():  # where each learner's memory is when they hold the most
                if totals.get("pss:" + name, 0.0) > self.peak.get("pss:" + name, 0.0):
                    self.at_peak[name] = {k.rsplit(":", 1)[1]: round(v, 1) for k, v in totals.items()
                                          if k.startswith(f"kind:{name}:")}
            for key, mb in totals.items():
                if not key.startswith("kind:"):
                    self._keep(key, mb)
            if self.pacing.is_set():
                self.load.append(os.getloadavg()[0])


def process_kind(process: psutil.Process) -> str:
    """A learner's process as the sizing reads it: their Jupyter server, the fork server (hub/fork_kernels.py),
    kernels (forked ones carry the fork server's command line; their parent is it, the learner's), or other."""
    line = " ".join(process.cmdline())
    if "fork_kernels.py" in line:
        parent = process.parent()
        ours = parent and parent.uids().real == process.uids().real and "fork_kernels.py" in " ".join(parent.cmdline())
        return "kernels" if ours else "fork server"
    if "ipykernel" in line:
        return "kernels"
    return "server" if "jupyterhub-singleuser" in line else "other"


def spread(values: list[float]) -> dict:
    return {"min": round(min(values), 1), "median": round(statistics.median(values), 1), "max": round(max(values), 1),
            "n": len(values)} if values else {"n": 0}


def p95(values: list[float]) -> float:
    return round(statistics.quantiles(values, n=20, method="inclusive")[-1], 1) if len(values) > 1 else values[0]


def cpu_s(uid: int) -> dict[str, float]:
    """CPU seconds of the processes of `uid` alive now, by kind (their kernels live through the paced minutes)."""
    total: dict[str, float] = {}
    for p in psutil.process_iter(["uids", "cpu_times"]):
        if p.info["uids"] and p.info["uids"].real == uid and p.info["cpu_times"]:
            try:
                kind = process_kind(p)
            except psutil.Error:
                continue
            total[kind] = total.get(kind, 0.0) + p.info["cpu_times"].user + p.info["cpu_times"].system
    return total


class StartLine:
    """Where the learners wait until every one has run the notebooks (or failed), so that all change settings
    together: the minutes measured are the whole room at its learners' pace, not some still running cells."""

    def __init__(self, learners: int):
        self.left, self.cond = learners, threading.Condition()

    def arrive(self) -> None:
        with self.cond:
            self.left -= 1
            self.cond.notify_all()

    def wait(self, deadline: float) -> None:
        with self.cond:
            self.cond.wait_for(lambda: self.left <= 0, timeout=max(0.0, deadline - time.monotonic()))


def contents(client: HubClient, path: str, tries: int = 5) -> dict:
    """A notebook as JupyterLab loads it; a busy room's proxy may answer 5xx at first, so a few tries."""
    for attempt in range(tries):
        response = client.server_api("GET", f"contents/{path}")
        if response.status_code == 200:
            return response.json()["content"]
        time.sleep(2 * (attempt + 1))
    raise RuntimeError(f"contents/{path}: {response.status_code} {response.text[:200]!r}")


def learner(base: str, name: str, password: str, i: int, failures: list, deadline: float, pace_s: float,
            seed: int, start_line: StartLine) -> dict:
    """One learner's session: log in, spawn, run beginner_1 and beginner_2, then change a setting every 2-4 s."""
    out: dict = {"name": name, "notebooks": {}, "changes": []}
    client, rng, kernels, sessions = HubClient(base, name), random.Random(seed * 1000 + i), [], []
    arrived = False
    try:
        if not client.login(password):
            raise RuntimeError("the login was refused")
        client.new_token()
        out["spawn_s"] = round(client.spawn(), 2)
        out["spawned_at"] = time.monotonic()
        for notebook in RUN:
            path = f"{NOTEBOOKS}/{notebook}"
            cells = contents(client, path)["cells"]
            session, kernel_id = client.open_notebook(path)
            sessions.append(session)
            kernels.append(Kernel(client, kernel_id))
            t0 = time.monotonic()
            for n, cell in enumerate(c for c in cells if c["cell_type"] == "code"):
                result = kernels[-1].execute(cell["source"], timeout=max(30.0, deadline - time.monotonic()))
                if result["error"]:
                    failures.append(f"{name}: {notebook}: code cell {n}: {result['error']}")
                    break
            out["notebooks"][notebook] = round(time.monotonic() - t0, 2)
        controls = [(k, comm) for k in kernels for comm in k.on_page() if new_setting(k.widgets[comm], rng)]
        if not controls:
            raise RuntimeError("no control to move in " + " or ".join(RUN))
        arrived = True
        start_line.arrive()
        start_line.wait(deadline)
        for kernel in kernels:  # one left unread while the other notebook ran may have been closed
            kernel.connect()
        uid, start = pwd.getpwnam(name).pw_uid, time.monotonic()
        cpu_before = cpu_s(uid)
        while time.monotonic() - start < pace_s and time.monotonic() < deadline:
            time.sleep(rng.uniform(*PACE_S))
            kernel, comm = rng.choice(controls)
            setting = new_setting(kernel.widgets.get(comm, {}), rng)
            if setting is None:  # closed, disabled or left with one option since
                continue
            answer = kernel.change(comm, setting, timeout=max(5.0, deadline - time.monotonic()))
            for other in kernels:  # read the other notebook's socket too, as a browser does
                if other is not kernel:
                    other.drain()
            out["changes"].append({"control": kernel.widgets.get(comm, {}).get("description") or
                                   kernel.widgets.get(comm, {}).get("_model_name"),
                                   "picture_ms": None if answer["picture_s"] is None else round(answer["picture_s"] * 1e3, 1),
                                   "idle_ms": round(answer["idle_s"] * 1e3, 1)})
        cpu_after, changes = cpu_s(uid), max(1, len(out["changes"]))
        out["cpu_ms_by_process"] = {kind: round((cpu_after[kind] - cpu_before.get(kind, 0.0)) * 1e3 / changes, 1)
                                    for kind in cpu_after}
        out["cpu_ms_per_change"] = round(sum(out["cpu_ms_by_process"].values()), 1)
    except Exception as error:  # noqa: BLE001 -- a failure is a measurement: recorded, the others go on
        failures.append(f"{name}: {type(error).__name__}: {error}")
        if not arrived:
            start_line.arrive()
    finally:
        for kernel in kernels:
            kernel.ws.close()
        for session in sessions:
            try:
                client.close_session(session)
            except Exception:  # noqa: BLE001 -- the hub is stopped after all the same
                pass
    return out


def interrupted(signum, frame) -> None:
    raise KeyboardInterrupt


def left_processes(uids: set[int], hub_pid: int | None) -> list[str]:
    left = []
    for p in psutil.process_iter(["pid", "uids", "ppid", "name", "cmdline"]):
        if (p.info["uids"] and p.info["uids"].real in uids) or (hub_pid and p.info["pid"] == hub_pid) \
                or "fork_kernels.py" in " ".join(p.info["cmdline"] or []):  # the room's fork server, root's
            left.append(f"{p.info['pid']} {p.info['name']}")
    return left


def room_record(learners: list[dict], meter: Meter | None, args) -> dict:
    """What the room measured while its learners changed settings: latency, CPU, memory and load."""
    changes = [c for x in learners for c in x["changes"]]
    seen = [c["picture_ms"] if c["picture_ms"] is not None else c["idle_ms"] for c in changes]
    per_learner = {x["name"]: p95([c["picture_ms"] if c["picture_ms"] is not None else c["idle_ms"]
                                   for c in x["changes"]]) for x in learners if x["changes"]}
    peaks, at_peak = (meter.peak, meter.at_peak) if meter else ({}, {})
    pss = {k.split(":", 1)[1]: round(v, 1) for k, v in sorted(peaks.items()) if k.startswith("pss:")}
    load = meter.load if meter else []
    return {
        "paced_minutes": args.minutes,
        "changes": len(changes),
        "changes_by_control": dict(sorted(Counter(str(c["control"]) for c in changes).items())),
        "with_a_picture": sum(c["picture_ms"] is not None for c in changes),
        "latency_ms": {**spread(seen), "p95": p95(seen)} if seen else {"n": 0},
        "learner_p95_ms": {**spread(list(per_learner.values())), "each": per_learner},
        "cpu_ms_per_change": spread([x["cpu_ms_per_change"] for x in learners if "cpu_ms_per_change" in x]),
        "cpu_ms_by_process": {kind: spread([x["cpu_ms_by_process"][kind] for x in learners
                                            if kind in x.get("cpu_ms_by_process", {})])
                              for kind in ("server", "fork server", "kernels", "other")},
        "pss_mb": {**spread(list(pss.values())), "each": pss},
        # where a learner's PSS is at their peak: their server, fork server, kernels (all of them together)
        "pss_by_process_mb": {kind: spread([x[kind] for x in at_peak.values() if kind in x])
                              for kind in ("server", "fork server", "kernels", "other")},
        "load_1min": {"mean": round(statistics.fmean(load), 2), "max": round(max(load), 2), "samples": len(load)}
        if load else {"samples": 0},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--learners", type=int, default=10, help="how many learners (1..40)")
    parser.add_argument("--minutes", type=float, default=5.0, help="how long each learner changes settings (0..30)")
    parser.add_argument("--seed", type=int, default=0, help="the learners' choices and pauses follow from it")
    parser.add_argument("--deadline", type=float, default=2400, help="seconds before the run stops itself")
    parser.add_argument("--output", type=Path, default=None, help="default: benchmarks/results/hub_room_<N>.json")
    args = parser.parse_args()
    if not 1 <= args.learners <= 40:
        raise SystemExit(f"--learners must be in 1..40, got {args.learners}")
    if not 0 <= args.minutes <= 30:
        raise SystemExit(f"--minutes must be in 0..30, got {args.minutes}")
    if os.geteuid() != 0:
        raise SystemExit("the simulated room runs as root: each learner is a system user (make hub-room)")
    output = args.output or RESULTS / f"hub_room_{args.learners}.json"
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
        start_line = StartLine(args.learners)
        pool = ThreadPoolExecutor(args.learners)
        try:
            futures = [pool.submit(learner, info["url"], n, password, i, failures, deadline, args.minutes * 60,
                                   args.seed, start_line) for i, n in enumerate(names)]
            start_line.wait(deadline)
            meter.pacing.set()  # the load is sampled while every learner changes settings
            learners = [f.result(timeout=max(1.0, deadline - time.monotonic())) for f in futures]
            meter.pacing.clear()
        finally:  # on a deadline or a kill, do not wait for the learners: stopping the hub ends their requests
            pool.shutdown(wait=False, cancel_futures=True)
        spawned = [x["spawned_at"] - t0 for x in learners if "spawned_at" in x]
        record = {
            "learners": args.learners,
            "all_spawned_s": round(max(spawned), 1) if len(spawned) == args.learners else None,
            "spawn_s": spread([x["spawn_s"] for x in learners if "spawn_s" in x]),
            "notebook_s": {nb: spread([x["notebooks"][nb] for x in learners if nb in x["notebooks"]]) for nb in RUN},
            **room_record(learners, meter, args),
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
        "command": f"python benchmarks/hub_room.py --learners {args.learners} --minutes {args.minutes:g}",
        "measured_on": time.strftime("%Y-%m-%d"),
        "machine": f"{platform.machine()}, {psutil.cpu_count()} cores, {round(psutil.virtual_memory().total / 2**30)} GiB",
        "load_average_1_5_15_end": [round(x, 2) for x in os.getloadavg()],
        "peak_mb": {"hub": round(peaks.get("hub", 0), 1), "proxy": round(peaks.get("proxy", 0), 1),
                    "services": round(peaks.get("services", 0), 1),
                    "room_fork_server_pss": round(peaks.get("room fork server", 0), 1),
                    "learner": spread(list(learner_peaks.values())),
                    "each_learner": learner_peaks},
        "failures": failures,
        "left_processes": left_processes(set(uids), hub_pid),
        "wall_s": round(time.monotonic() - t_start, 1),
    })
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(record, indent=2) + "\n")
    print(json.dumps(record, indent=2))
    if failures or record["left_processes"]:
        sys.exit(1)


if __name__ == "__main__":
    main()
