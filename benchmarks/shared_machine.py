"""Reliability on a shared machine, as another user would try it (benchmarks/reliability.py runs these):

- rendezvous: another user tries a DDP run's store folder and sprays its gloo ports; passes if the folder
  was closed, nothing answered from another address, the run ended right or with a DDPError, and the
  folder is gone (also within 10 s of its kernel's SIGKILL);
- progress_planting: another user plants a learner's progress file and holds its lock first; passes if the
  check neither waits nor shows the planted passes, and 20 writes killed midway leave no temporary file;
- budget: benchmarks/sizes.py under LAB_MEMORY_LIMIT_MB=256;
- projector_cap: 10 views at once of present/serve.py (cap 3); passes if at most 3 kernels ran, the others
  got the page saying the view is full, and every kernel was culled in time.
"""
from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOBODY = 65534


def _as_nobody(code: str, *args: str, **kw) -> subprocess.Popen:
    return subprocess.Popen(["/usr/bin/python3", "-c", code, *args], user=NOBODY, group=NOBODY, extra_groups=[],
                            cwd="/", text=True, **kw)


# --- 6. the gloo rendezvous ------------------------------------------------------------------------

_RUN = """
import json
from widgets.research.ddp import DDPConfig, DDPError, run_ddp
try:
    result = run_ddp(DDPConfig(accumulation_steps=32, micro_batch_size=32, num_updates=6), timeout_s=300)
    ok = [result.allclose_to_single_process(m) for m in ("every_micro_step", "no_sync")]
    print(json.dumps({"ended": "right weights" if all(ok) else "WRONG WEIGHTS", "seconds": round(result.seconds, 1)}))
except DDPError as error:
    print(json.dumps({"ended": "DDPError", "why": str(error)[:300]}))
"""

# Another user: reads ports on stdin (as soon as the observer sees them) and sprays each with random
# bytes five times over 2 s; first tries the store's folder. Prints what happened, as JSON.
_INTRUDER = """
import json, os, socket, sys, time
folder = sys.argv[1]
seen = {"folder": [], "ports": {}}
for attempt in (lambda: os.listdir(folder), lambda: open(os.path.join(folder, "store"), "rb"),
                lambda: open(os.path.join(folder, "planted"), "wb")):
    try:
        attempt()
        seen["folder"].append("allowed")
    except OSError as error:
        seen["folder"].append(error.strerror)
for line in sys.stdin:
    port = int(line)
    for _ in range(5):
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
                s.sendall(os.urandom(512))
            seen["ports"].setdefault(str(port), []).append("sent")
        except OSError as error:
            seen["ports"].setdefault(str(port), []).append(error.strerror)
        time.sleep(0.4)
print(json.dumps(seen))
"""


def _other_addresses() -> list[str]:
    import psutil
    return [a.address for addrs in psutil.net_if_addrs().values() for a in addrs
            if a.family == socket.AF_INET and not a.address.startswith("127.")]


def _run_parts(kernel, deadline: float):
    """The kernel's janitor (its argv names the folder) and workers, once both exist."""
    import psutil
    parent = psutil.Process(kernel.pid)
    while time.monotonic() < deadline and kernel.poll() is None:
        children = parent.children()
        janitor = [p for p in children if "lab-gloo-" in " ".join(p.cmdline())]
        workers = [p for p in children if "multiprocessing.spawn" in " ".join(p.cmdline())
                   and "resource_tracker" not in " ".join(p.cmdline())]
        if janitor and len(workers) == 2:
            return janitor[0], workers
        time.sleep(0.05)
    raise RuntimeError("the run never started its workers")


def rendezvous() -> dict:
    import psutil
    root = os.geteuid() == 0
    kernel = subprocess.Popen([sys.executable, "-c", _RUN], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    intruder, reached_from_outside, ports = None, [], set()
    try:
        janitor, workers = _run_parts(kernel, time.monotonic() + 180)
        folder = next(a for a in janitor.cmdline() if "lab-gloo-" in a)
        if root:
            intruder = _as_nobody(_INTRUDER, folder, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and kernel.poll() is None and len(ports) < 4:
            for w in workers:
                try:
                    for c in w.net_connections(kind="inet"):
                        if c.status == psutil.CONN_LISTEN and c.laddr.port not in ports:
                            ports.add(c.laddr.port)
                            if c.laddr.ip != "127.0.0.1":
                                reached_from_outside.append(f"listens on {c.laddr.ip}:{c.laddr.port}")
                            if intruder:
                                intruder.stdin.write(f"{c.laddr.port}\n")
                                intruder.stdin.flush()
                            for address in _other_addresses():
                                with socket.socket() as s:
                                    s.settimeout(2)
                                    if s.connect_ex((address, c.laddr.port)) == 0:
                                        reached_from_outside.append(f"{address}:{c.laddr.port}")
                except psutil.Error:
                    pass
            time.sleep(0.02)
        out, _ = kernel.communicate(timeout=400)
        ended = json.loads(out.strip().splitlines()[-1])
        seen = {}
        if intruder:
            seen = json.loads(intruder.communicate(timeout=60)[0])
        folder_left = Path(folder).exists()
    finally:
        for p in (kernel, intruder):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait()
    killed = _killed_run_leaves_no_folder()
    result = {
        "passed": (ended["ended"] != "WRONG WEIGHTS" and not reached_from_outside and not folder_left
                   and (not root or set(seen["folder"]) == {"Permission denied"}) and killed["folder_gone_within_s"] is not None),
        "run": ended, "store": "file store in a mode-700 folder (no port)", "gloo_ports_seen": len(ports),
        "other_user": seen if root else "not tried: run as root to try as another user",
        "from_other_addresses": reached_from_outside or f"refused on {_other_addresses() or 'no other address'}",
        "folder_left_after_the_run": folder_left, "kernel_killed": killed,
    }
    print(f"rendezvous: {result}", flush=True)
    return result


def _killed_run_leaves_no_folder() -> dict:
    kernel = subprocess.Popen([sys.executable, "-c", _RUN], cwd=ROOT, stdout=subprocess.DEVNULL)
    try:
        janitor, _ = _run_parts(kernel, time.monotonic() + 180)
        folder = Path(next(a for a in janitor.cmdline() if "lab-gloo-" in a))
        time.sleep(2)
        kernel.kill()
        kernel.wait()
        killed, gone_s = time.monotonic(), None
        while time.monotonic() - killed < 10:
            if not folder.exists():
                gone_s = round(time.monotonic() - killed, 2)
                break
            time.sleep(0.05)
    finally:
        if kernel.poll() is None:
            kernel.kill()
            kernel.wait()
    return {"folder_gone_within_s": gone_s}


# --- 7. a progress file another user planted -------------------------------------------------------

_PLANT = """
import fcntl, json, sys, time
path = sys.argv[1]
json.dump({"format": 2, "sets": {"Planted": {"win": {"title": "Not yours", "passed": True}}}, "records": []}, open(path, "w"))
lock = open(path + ".lock", "w")
fcntl.flock(lock, fcntl.LOCK_EX)
print("holding", flush=True)
time.sleep(60)
"""

_VICTIM = """
import json, time
from widgets.lab import progress
t0 = time.perf_counter()
saved = progress.note_check("Mine", "first", True)
seconds = time.perf_counter() - t0
shown = repr(progress.progress())
print(json.dumps({"saved": saved, "seconds": round(seconds, 2), "planted_shown": "Not yours" in shown,
                  "says": [line for line in shown.splitlines() if "another user" in line][:1]}))
"""

_KILLED_WRITE = """
import os, signal
from widgets.lab import progress
progress.os.replace = lambda *a: os.kill(os.getpid(), signal.SIGKILL)  # dies between the write and the rename
progress.note_check("Mine", "first", True)
"""


def progress_planting(kills: int = 20) -> dict:
    result: dict = {}
    if os.geteuid() == 0:
        shared = Path(tempfile.mkdtemp(prefix="lab-shared-tmp-"))
        shared.chmod(0o1777)  # like /tmp: anyone may create, only the owner may replace
        path = shared / "learner-progress.json"
        planter = _as_nobody(_PLANT, str(path), stdout=subprocess.PIPE)
        try:
            assert planter.stdout.readline().strip() == "holding"
            victim = subprocess.run([sys.executable, "-c", _VICTIM], env={**os.environ, "LAB_PROGRESS_FILE": str(path)},
                                    capture_output=True, text=True, timeout=120)
            result["planted"] = json.loads(victim.stdout)
        finally:
            planter.kill()
            planter.wait()
            shutil.rmtree(shared, ignore_errors=True)
    else:
        result["planted"] = "not tried: run as root to plant as another user"
    with tempfile.TemporaryDirectory(prefix="lab-private-") as private:
        env = {**os.environ, "LAB_PROGRESS_FILE": str(Path(private) / "progress.json")}
        for _ in range(kills):
            subprocess.run([sys.executable, "-c", _KILLED_WRITE], env=env, timeout=60)
        left_by_kills = len(list(Path(private).glob("progress.json*.tmp")))
        subprocess.run([sys.executable, "-c", "from widgets.lab import progress; progress.note_check('Mine', 'x', True)"],
                       env=env, timeout=60, check=True)
        left_after = len(list(Path(private).glob("progress.json*.tmp")))
    result["killed_writes"] = {"kills": kills, "temporary_files_left_by_the_kills": left_by_kills,
                               "left_after_the_next_write": left_after}
    planted = result["planted"]
    result["passed"] = bool(left_after == 0 and (isinstance(planted, str) or (not planted["saved"] and not planted["planted_shown"]
                                                                           and planted["seconds"] < 5 and planted["says"])))
    print(f"progress_planting: {result}", flush=True)
    return result


# --- 8. every size checked before allocation ---------------------------------------------------------

def budget() -> dict:
    run = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "sizes.py"), "--json"], capture_output=True, text=True,
                         env={**os.environ, "MALLOC_ARENA_MAX": "2"}, timeout=3600)
    found = json.loads(run.stdout)
    result = {"passed": found["passed"], "budget_mb": found["budget_mb"], "sizes": found["sizes"],
              "builders": found["builders"], "calls": found["calls"], "over_budget": found["over_budget"],
              "not_probed": found["not_probed"],
              "largest_growth_mb": max((r["grew_mb"] or 0) for r in found["records"]),
              "command": "python benchmarks/sizes.py"}
    print(f"budget: {result['calls']} calls to {result['builders']} builders, {len(result['over_budget'])} over", flush=True)
    return result


# --- 9. the projector view's kernel cap --------------------------------------------------------------

def projector_cap(views: int = 10, cull_idle_s: int = 30) -> dict:
    import urllib.error
    import urllib.request
    from concurrent.futures import ThreadPoolExecutor

    import psutil

    runtime = Path(tempfile.mkdtemp(prefix="projector-"))
    server = subprocess.Popen([sys.executable, "present/serve.py", f"--cull-idle-s={cull_idle_s}"], cwd=ROOT, text=True,
                              env={**os.environ, "JUPYTER_RUNTIME_DIR": str(runtime), "LAB_STATE": "", "LAB_PRESET": ""},
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True)
    peak, seen, tree = 0, set(), []

    def kernels():
        try:
            return [p for p in psutil.Process(server.pid).children(recursive=True) if "ipykernel" in " ".join(p.cmdline())]
        except psutil.Error:
            return []

    def view(url):
        try:
            with urllib.request.urlopen(url, timeout=300) as response:
                return response.status, ""
        except urllib.error.HTTPError as error:
            return error.code, error.read().decode(errors="replace")

    try:
        url = ""
        while not url:
            line = server.stdout.readline()
            if not line and server.poll() is not None:
                raise RuntimeError("present/serve.py exited before serving")
            url = line.strip() if line.startswith("    http://127.0.0.1:") else ""
        with ThreadPoolExecutor(views) as pool:
            pending = pool.map(view, [url] * views)
            answers = []
            for answer in pending:
                answers.append(answer)
                now = kernels()
                seen.update(p.pid for p in now)
                peak = max(peak, len(now))
        tree = psutil.Process(server.pid).children(recursive=True)
        last = time.monotonic()
        while kernels() and time.monotonic() - last < cull_idle_s + 120:  # views run their cells first (slow when loaded)
            peak = max(peak, len(kernels()))
            time.sleep(1)
        left = len(kernels())
        culled_s = round(time.monotonic() - last, 1)
    finally:
        if server.poll() is None:
            tree += psutil.Process(server.pid).children(recursive=True)
            server.terminate()
            try:
                server.wait(30)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
        for p in tree:
            try:
                p.kill()
            except psutil.Error:
                pass
        server.stdout.close()
        shutil.rmtree(runtime, ignore_errors=True)
    statuses = sorted(status for status, _ in answers)
    full_pages = [page for status, page in answers if status == 503]
    result = {"passed": peak <= 3 and statuses.count(200) <= 3 and len(full_pages) == views - statuses.count(200)
              and all("At most 3 kernels run here at once" in page for page in full_pages) and left == 0,
              "views_at_once": views, "statuses": statuses, "kernels_started": len(seen), "peak_kernels": peak,
              "cap": 3, "kernels_left": left, "all_culled_within_s_of_the_last_view": culled_s if left == 0 else None}
    print(f"projector_cap: {result}", flush=True)
    return result
