"""The slow reliability checks, outside `make test`; results go to benchmarks/results/reliability.json.

    python benchmarks/reliability.py              # all three checks below, then write the results
    python benchmarks/reliability.py leak         # 500 slider changes on the explorer in a real kernel
    python benchmarks/reliability.py nbval        # nbval over every notebook, three times in a row
    python benchmarks/reliability.py offline [notebooks/x.ipynb ...]   # run notebooks with no network

- leak: a random (seeded) walk of 500 changes over every slider, bug switch and setting of the
  explorer, cold values and cache evictions included, in an ipykernel started by jupyter_client.
  Passes if no change raised or printed an error, the open figures (pyplot and `Figure` objects)
  stay constant, and the kernel's RSS grows <= 30 MB after the first 50 changes (warm-up: caches,
  fonts, torch's allocator).
- nbval: `python -m pytest notebooks/` three times; every run must pass.
- offline: each notebook executed top to bottom (nbclient, a fresh kernel on ipc sockets, so no
  TCP at all) inside `unshare -n` — a network namespace with no interface up — and with an audit
  hook in the kernel that records any socket connect or DNS lookup other than loopback/unix.
  Where `unshare -n` is not permitted, the audit hook alone decides (the mode is recorded).
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
from widgets.controls.explorer import K_RANGE, B_RANGE, MAIN_BUGS, make_accumulation_explorer

box = make_accumulation_explorer()
display(box)  # as in a notebook: the widget has a comm and sends its updates
rng = random.Random(0)
LEARNING_RATES = [0.01, 0.03, 0.1, 0.3, 1.0]

def figures():
    gc.collect()
    return sum(type(o) is Figure for o in gc.get_objects())

def one_change():
    c = box.controls
    kind = rng.choice(["accumulation_steps", "micro_batch_size", "learning_rate", "bug", "tail_micro_batches"])
    if kind == "accumulation_steps":
        c[kind].value = rng.randint(*K_RANGE)
    elif kind == "micro_batch_size":
        c[kind].value = rng.randint(*B_RANGE)
    elif kind == "learning_rate":
        c[kind].value = rng.choice(LEARNING_RATES)
    elif kind == "bug":
        name = rng.choice(MAIN_BUGS)
        c[name].value = not c[name].value
    else:
        c[kind].value = rng.randint(0, c[kind].max)

def chunk(n):
    for _ in range(n):
        one_change()
        if box.errors.outputs:
            raise RuntimeError(box.errors.outputs[0].get("text", box.errors.outputs))
    print(json.dumps({"rss_mb": psutil.Process().memory_info().rss / 2**20, "pyplot": plt.get_fignums(),
                      "figures": figures(), "cached_records": len(box._records)}))
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
    return bool(unshare) and subprocess.run([unshare, "-n", "true"], capture_output=True).returncode == 0


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
        if namespace:
            command = [shutil.which("unshare"), "-n", *command]
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
        "mode": "unshare -n (no network interface) + audit hook" if namespace else "audit hook only (unshare -n not permitted)",
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


def main(argv: list[str]) -> int:
    what = argv[0] if argv else "all"
    if what == "_execute_notebook":
        _execute_notebook(Path(argv[1]))
        return 0
    notebooks = [Path(p).resolve() for p in argv[1:]] or sorted((ROOT / "notebooks").glob("*.ipynb"))
    checks = {"leak": lambda: leak(), "nbval": lambda: nbval(), "offline": lambda: offline(notebooks)}
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
