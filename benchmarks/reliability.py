"""The slow reliability checks, outside `make test`; results go to benchmarks/results/reliability.json.

    python benchmarks/reliability.py              # every check below, then write the results
    python benchmarks/reliability.py leak         # 500 slider changes on the explorer in a real kernel
    python benchmarks/reliability.py nbval        # nbval over every notebook, three times in a row
    python benchmarks/reliability.py offline [notebooks/x.ipynb ...]   # run notebooks with no network
    python benchmarks/reliability.py ddp_kill     # a kernel running DDP is SIGKILLed: its workers must exit
    python benchmarks/reliability.py projector    # 20 GETs of the projector page without JavaScript
    python benchmarks/reliability.py progress     # 2, then 8 processes recording passes into one progress file
    python benchmarks/reliability.py rendezvous   # another user and other addresses try a DDP run's rendezvous
    python benchmarks/reliability.py progress_planting  # another user plants a progress file and its lock first
    python benchmarks/reliability.py budget       # every public builder given an enormous size (sizes.py)
    python benchmarks/reliability.py projector_cap      # 10 projector views at once: at most 3 kernels

The last four are benchmarks/shared_machine.py's (issue 31); its docstring says what each passes on.

- leak: a random (seeded) walk of 500 changes over every slider, the mistake and every setting of the
  explorer, cold values and cache evictions included, in an ipykernel started by jupyter_client.
  Passes if no change raised or printed an error, the open figures (pyplot and `Figure` objects)
  stay constant, and the kernel's RSS grows <= 30 MB after the first 50 changes (warm-up: caches,
  fonts, torch's allocator).
- nbval: `python -m pytest notebooks/` three times; every run must pass.
- offline: each notebook executed top to bottom (nbclient, a fresh kernel on ipc sockets) inside
  `unshare -n` — a network namespace with only the loopback interface, brought up as on any machine
  without a network (researcher_5-7's gloo workers meet on 127.0.0.1) — and with an audit hook in the
  kernel that records any socket connect or DNS lookup other than loopback/unix.
  Where `unshare -n` is not permitted, the audit hook alone decides (the mode is recorded).
- progress: 2, then 8 writer processes each record 100 passes of their own into one progress file
  (widgets/lab/progress.py), in a tight loop, all at once. Passes if no pass and no record is lost
  and every check was saved.
- ddp_kill: a stand-in kernel runs `run_ddp` (2 workers, a ~1 min job); once the workers train it
  is SIGKILLed, as the OOM killer would. Passes if no worker is alive 3 s later.
- projector: `present/serve.py` (what `make present` runs, default cull: 30 s idle, checked every
  5 s) gets 20 GETs of its page with the token and no JavaScript (curl, an `<img src>`, a crawler),
  one after another. Passes if every kernel they started is culled within cull + 30 s, and a GET
  without the token gets no page and starts no kernel. Peak kernels and their memory are recorded.
"""
from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "reliability.json"
RSS_BUDGET_MB = 30

# --- leak ----------------------------------------------------------------------------------------

_LEAK_SETUP = """
import gc, json, random
import psutil
import matplotlib.pyplot as plt
from matplotlib.figure import Figure
from widgets.lessons.beginner_2.controls import B_RANGE, K_RANGE, MAIN_MISTAKES, make_accumulation_explorer, record_for

box = make_accumulation_explorer()
display(box)  # as in a notebook: the widget has a comm and sends its updates
rng = random.Random(0)
LEARNING_RATES = [0.01, 0.03, 0.1, 0.3, 1.0]

def figures():
    gc.collect()
    return sum(type(o) is Figure for o in gc.get_objects())

def one_change():
    c = box.controls
    kind = rng.choice(["accumulation_steps", "micro_batch_size", "learning_rate", "mistake", "tail_micro_batches"])
    if kind == "accumulation_steps":
        c[kind].value = rng.randint(*K_RANGE)
    elif kind == "micro_batch_size":
        c[kind].value = rng.randint(*B_RANGE)
    elif kind == "learning_rate":
        c[kind].value = rng.choice(LEARNING_RATES)
    elif kind == "mistake":
        name = rng.choice(MAIN_MISTAKES)
        c[kind].value = "" if c[kind].value == name else name
    else:
        c[kind].value = rng.randint(0, c[kind].max)

def chunk(n):
    for _ in range(n):
        one_change()
        if box.errors.outputs:
            raise RuntimeError(box.errors.outputs[0].get("text", box.errors.outputs))
    print(json.dumps({"rss_mb": psutil.Process().memory_info().rss / 2**20, "pyplot": plt.get_fignums(),
                      "figures": figures(), "cached_records": record_for.cache_info().currsize}))
"""


def leak(changes: int = 500, chunk: int = 50) -> dict:
    from jupyter_client.manager import start_new_kernel

    km, kc = start_new_kernel(kernel_name="python3")
    samples, error = [], None
    start = time.perf_counter()
    try:
        _execute(kc, _LEAK_SETUP)
        samples.append(json.loads(_execute(kc, "chunk(0)")))
        for _ in range(changes // chunk):
            samples.append(json.loads(_execute(kc, f"chunk({chunk})")))
    except RuntimeError as e:
        error = str(e)
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
    seconds = time.perf_counter() - start
    warm, last = (samples[1], samples[-1]) if len(samples) > 2 else (None, None)
    growth = round(last["rss_mb"] - warm["rss_mb"], 1) if warm else None
    passed = (
        error is None and warm is not None
        and all(s["pyplot"] == [] for s in samples)
        and len({s["figures"] for s in samples}) == 1
        and growth <= RSS_BUDGET_MB
    )
    return {
        "passed": passed,
        "changes": changes,
        "error": error,
        "rss_growth_after_warmup_mb": growth,
        "rss_budget_mb": RSS_BUDGET_MB,
        "seconds": round(seconds, 1),
        "per_chunk_of_50": [{k: (round(v, 1) if isinstance(v, float) else v) for k, v in s.items()} for s in samples],
    }


def _execute(kc, code: str, timeout: float = 600) -> str:
    """Run `code` in the kernel; return its stdout; raise RuntimeError on an exception."""
    out: list[str] = []

    def hook(msg):
        if msg["msg_type"] == "stream" and msg["content"]["name"] == "stdout":
            out.append(msg["content"]["text"])
        elif msg["msg_type"] == "error":
            out.append("\n".join(msg["content"]["traceback"]))

    reply = kc.execute_interactive(code, output_hook=hook, timeout=timeout)
    if reply["content"]["status"] != "ok":
        raise RuntimeError("".join(out)[-2000:])
    return "".join(out).strip()


# --- nbval three times -----------------------------------------------------------------------------

def nbval(times: int = 3) -> dict:
    runs = []
    for _ in range(times):
        start = time.perf_counter()
        result = subprocess.run([sys.executable, "-m", "pytest", "-q", "notebooks"], cwd=ROOT, capture_output=True, text=True)
        summary = (result.stdout.strip().splitlines() or [""])[-1]
        runs.append({"passed": result.returncode == 0, "summary": summary, "seconds": round(time.perf_counter() - start, 1)})
        print(f"nbval run {len(runs)}: {summary}", flush=True)
    return {"passed": all(r["passed"] for r in runs), "command": "python -m pytest notebooks", "runs": runs}


# --- offline -------------------------------------------------------------------------------------

# Installed as sitecustomize in every Python process of the offline run (the kernel included):
# records what would use the network. Unix sockets and loopback stay allowed.
_GUARD = '''
import os, sys
LOG = os.environ["OFFLINE_GUARD_LOG"]
LOCAL = {"127.0.0.1", "::1", "localhost", "0.0.0.0", "", None}

def _note(what):
    with open(LOG, "a") as f:
        f.write(what + "\\n")

def _hook(event, args):
    if event == "socket.connect":
        address = args[1]
        if isinstance(address, tuple) and address[0] not in LOCAL:
            _note(f"socket.connect {address!r}")
    elif event == "socket.getaddrinfo" and args[0] not in LOCAL:
        _note(f"socket.getaddrinfo {args[0]!r}")
    elif event == "urllib.Request":
        _note(f"urllib.Request {args[0]!r}")

sys.addaudithook(_hook)
'''


def unshare_permitted() -> bool:
    unshare = shutil.which("unshare")
    return bool(unshare) and subprocess.run([unshare, "-n", "sh", "-c", "ip link set lo up"],
                                            capture_output=True).returncode == 0


def offline(notebooks: list[Path]) -> dict:
    """Execute each notebook with no network; a notebook passes if it ran and tried no connection."""
    work = Path(tempfile.mkdtemp(prefix="offline-"))
    (work / "sitecustomize.py").write_text(textwrap.dedent(_GUARD))
    namespace = unshare_permitted()
    results = {}
    for path in notebooks:
        log = work / f"{path.stem}.log"
        log.touch()
        env = dict(os.environ, PYTHONPATH=str(work), OFFLINE_GUARD_LOG=str(log))
        command = [sys.executable, str(Path(__file__).resolve()), "_execute_notebook", str(path)]
        if namespace:  # a new namespace's loopback starts down: up it, as an offline laptop has it
            command = [shutil.which("unshare"), "-n", "sh", "-c", 'ip link set lo up && exec "$@"', "sh", *command]
        start = time.perf_counter()
        run = subprocess.run(command, env=env, capture_output=True, text=True)
        attempts = sorted(set(log.read_text().splitlines()))
        key = path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else str(path)
        results[key] = {
            "passed": run.returncode == 0 and not attempts,
            "seconds": round(time.perf_counter() - start, 1),
            "network_attempts": attempts,
            **({"error": run.stderr[-2000:]} if run.returncode else {}),
        }
        print(f"offline {'ok  ' if results[key]['passed'] else 'FAIL'} {path.name}", flush=True)
    shutil.rmtree(work, ignore_errors=True)
    return {
        "passed": bool(results) and all(r["passed"] for r in results.values()),
        "mode": "unshare -n (loopback only) + audit hook" if namespace else "audit hook only (unshare -n not permitted)",
        "notebooks": results,
    }


def _execute_notebook(path: Path) -> None:
    """Child process of `offline`: run one notebook on ipc sockets (no TCP, not even loopback)."""
    import nbformat
    from jupyter_client import KernelManager
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    # An absolute socket path: the kernel starts in the notebook's folder, the client does not.
    with tempfile.TemporaryDirectory(prefix="kernel-ipc-") as sockets:
        km = KernelManager(kernel_name="python3", transport="ipc", ip=str(Path(sockets) / "kernel"))
        NotebookClient(nb, km=km, timeout=600, resources={"metadata": {"path": str(path.parent)}}).execute()


# --- progress race --------------------------------------------------------------------------------

_PROGRESS_WRITER = """
import sys
from widgets.lab import progress
me, checks = sys.argv[1], int(sys.argv[2])
sys.exit(sum(not progress.note_check("Race", f"{me}-{i}", True) for i in range(checks)))  # the unsaved ones
"""


def progress_race(writers: tuple[int, ...] = (2, 8), checks: int = 100) -> dict:
    """Each of `writers` processes records `checks` passes at once into one fresh file; count what is kept."""
    from widgets.lab import progress

    runs = {}
    for n in writers:
        with tempfile.TemporaryDirectory(prefix="progress-race-") as folder:
            path = Path(folder) / "progress.json"
            env = dict(os.environ, LAB_PROGRESS_FILE=str(path))
            start = time.perf_counter()
            children = [subprocess.Popen([sys.executable, "-c", _PROGRESS_WRITER, str(w), str(checks)], env=env)
                        for w in range(n)]
            unsaved = sum(child.wait() for child in children)
            seconds = time.perf_counter() - start
            passes = sum(e["passed"] for e in json.loads(path.read_text())["sets"]["Race"].values())
            records = len(progress.read_records(path))
        runs[str(n)] = {"checks": n * checks, "passes_kept": passes, "records_kept": records,
                        "lost": n * checks - passes, "unsaved": unsaved, "seconds": round(seconds, 1)}
        print(f"progress race, {n} writers: {passes} of {n * checks} passes kept", flush=True)
    return {"passed": all(r["lost"] == 0 and r["records_kept"] == r["checks"] and r["unsaved"] == 0 for r in runs.values()),
            "checks_per_writer": checks, "writers": runs}


# --- processes: a killed kernel's DDP workers, projector GETs without JavaScript ------------------

_DDP_KERNEL = """
from widgets.research.ddp import DDPConfig, run_ddp
run_ddp(DDPConfig(accumulation_steps=64, micro_batch_size=64, num_updates=100), timeout_s=600)
"""


def _kill_all(processes) -> None:
    import psutil

    for p in processes:
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass


def ddp_kernel_killed(grace_s: float = 3.0) -> dict:
    """SIGKILL a process in the middle of `run_ddp`; how long until its workers are gone?"""
    import psutil

    kernel = subprocess.Popen([sys.executable, "-c", _DDP_KERNEL], cwd=ROOT, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    parent, workers = psutil.Process(kernel.pid), []
    try:
        deadline = time.monotonic() + 120
        while len(workers) < 2 and kernel.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
            workers = [p for p in parent.children() if "multiprocessing.spawn" in " ".join(p.cmdline())
                       and "resource_tracker" not in " ".join(p.cmdline())]
        def joined(worker) -> bool:  # a TCP connection to the store: past start-up, in the group
            try:
                return any(c.status == psutil.CONN_ESTABLISHED for c in worker.net_connections(kind="tcp"))
            except psutil.NoSuchProcess:
                return False

        while workers and not all(joined(w) for w in workers) and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(1)
        training = sum(w.is_running() for w in workers)
        kernel.kill()
        kernel.wait()
        killed = time.perf_counter()
        alive = workers
        while alive and time.perf_counter() - killed < grace_s:
            alive = [w for w in alive if w.is_running() and w.status() != psutil.STATUS_ZOMBIE]
            time.sleep(0.05)
        exit_s = time.perf_counter() - killed
    finally:
        if kernel.poll() is None:
            kernel.kill()
            kernel.wait()
        _kill_all(workers)
    result = {"passed": len(workers) == 2 and training == 2 and not alive, "workers": len(workers),
              "training_when_killed": training, "alive_after_grace": len(alive), "grace_s": grace_s,
              "all_gone_within_s": None if alive else round(exit_s, 2)}
    print(f"ddp_kill: {result}", flush=True)
    return result


def projector_gets(gets: int = 20, cull_idle_s: int = 30, cull_interval_s: int = 5) -> dict:
    """GET the projector page `gets` times with no JavaScript; are the kernels culled, is the token needed?"""
    import psutil
    import urllib.error
    import urllib.request

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args, **kwargs):
            return None

    def status(url: str) -> int:
        try:
            with urllib.request.build_opener(NoRedirect).open(url, timeout=300) as response:
                response.read()
                return response.status
        except urllib.error.HTTPError as error:
            return error.code

    runtime = Path(tempfile.mkdtemp(prefix="projector-"))
    env = dict(os.environ, JUPYTER_RUNTIME_DIR=str(runtime), LAB_PRESET="")
    server = subprocess.Popen([sys.executable, "present/serve.py", f"--cull-idle-s={cull_idle_s}",
                               f"--cull-interval-s={cull_interval_s}"], cwd=ROOT, env=env, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True)
    tree, seen, peak, peak_mb = [], set(), 0, 0.0

    def kernels():
        try:
            return [p for p in psutil.Process(server.pid).children(recursive=True)
                    if "ipykernel" in " ".join(p.cmdline())]
        except psutil.NoSuchProcess:
            return []

    def sample():
        nonlocal peak, peak_mb
        now = kernels()
        seen.update(p.pid for p in now)
        peak = max(peak, len(now))
        mb = 0.0
        for p in now:
            try:
                mb += p.memory_info().rss / 2**20
            except psutil.NoSuchProcess:
                pass
        peak_mb = max(peak_mb, mb)
        return now

    try:
        url = ""
        while not url:
            line = server.stdout.readline()
            if not line and server.poll() is not None:
                raise RuntimeError("present/serve.py exited before serving")
            url = line.strip() if line.startswith("    http://127.0.0.1:") else ""
        base = url.split("?")[0]
        without_token = status(base)
        kernels_without_token = len(kernels())
        statuses = []
        start = time.perf_counter()
        for _ in range(gets):
            statuses.append(status(url))
            sample()
        tree = psutil.Process(server.pid).children(recursive=True)
        last_get = time.perf_counter()
        while sample() and time.perf_counter() - last_get < cull_idle_s + 30:
            time.sleep(1)
        left = len(kernels())
        culled_after_s = round(time.perf_counter() - last_get, 1)
        total_s = round(time.perf_counter() - start, 1)
    finally:
        if server.poll() is None:
            tree += psutil.Process(server.pid).children(recursive=True)
            server.terminate()
            try:
                server.wait(30)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
        _kill_all(tree)
        server.stdout.close()
        shutil.rmtree(runtime, ignore_errors=True)
    result = {
        "passed": without_token in (302, 403) and kernels_without_token == 0 and statuses == [200] * gets and left == 0,
        "gets": gets, "statuses": sorted(set(statuses)), "without_token_status": without_token,
        "kernels_started": len(seen), "peak_kernels": peak, "peak_kernel_mb": round(peak_mb),
        "kernels_left": left, "all_culled_within_s_of_last_get": culled_after_s if left == 0 else None,
        "cull_idle_s": cull_idle_s, "cull_interval_s": cull_interval_s, "seconds": total_s,
    }
    print(f"projector: {result}", flush=True)
    return result


def _beside(name: str):
    """The module `name`.py next to this script (a script's folder is no package to import from)."""
    import importlib.util
    spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name(f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(argv: list[str]) -> int:
    what = argv[0] if argv else "all"
    if what == "_execute_notebook":
        _execute_notebook(Path(argv[1]))
        return 0
    notebooks = [Path(p).resolve() for p in argv[1:]] or sorted((ROOT / "notebooks").glob("*.ipynb"))
    checks = {"leak": lambda: leak(), "nbval": lambda: nbval(), "offline": lambda: offline(notebooks),
              "progress": lambda: progress_race()}
    checks |= {"ddp_kill": lambda: ddp_kernel_killed(), "projector": lambda: projector_gets()}
    shared = _beside("shared_machine")  # the checks a shared machine needs (its docstring)
    checks |= {"rendezvous": shared.rendezvous, "progress_planting": shared.progress_planting,
               "budget": shared.budget, "projector_cap": shared.projector_cap}
    chosen = list(checks) if what == "all" else [what]
    record = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    for name in chosen:
        record[name] = checks[name]()
        record[name]["date"] = time.strftime("%Y-%m-%d %H:%M")
        print(f"{name}: {'PASSED' if record[name]['passed'] else 'FAILED'}", flush=True)
    if what == "offline" and argv[1:]:  # a spot check (e.g. from tests/test_offline.py): print, keep the file
        print(json.dumps(record["offline"], indent=2))
        return 0 if record["offline"]["passed"] else 1
    record["command"] = "python benchmarks/reliability.py"
    record["machine"] = f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(record, indent=2) + "\n")
    print(f"written to {RESULTS.relative_to(ROOT)}")
    return 0 if all(record[name]["passed"] for name in chosen) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
