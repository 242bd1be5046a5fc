"""A room on one machine: peak kernel memory per notebook, and 5 and 10 kernels running at once.

    python benchmarks/classroom.py                  # all of it (a few minutes on 2 cores)
    python benchmarks/classroom.py --rooms 5        # only the 5-kernel room

Each learner's kernel runs a notebook (nbclient, a worker process each, all started together), sampled
every 50 ms; an idle JupyterLab server is measured once, since every learner has one beside the kernel.
Writes benchmarks/results/classroom.json (instructor/make_plans.py reads it).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import secrets
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
RESULT = ROOT / "benchmarks" / "results" / "classroom.json"
START_HERE = "notebooks/00_start_here.ipynb"
EXPLORER = "notebooks/beginner_2_watch_a_model_learn.ipynb"  # the notebook built around the explorer
BINDER_MB = 1024


def worker(notebook: str) -> None:
    """Run one notebook in a fresh kernel (the learner's Run All); print its seconds as JSON."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(ROOT / notebook, as_version=4)
    start = time.perf_counter()
    NotebookClient(nb, timeout=600, kernel_name="python3", allow_errors=True,
                   resources={"metadata": {"path": str((ROOT / notebook).parent)}}).execute()
    print(json.dumps({"seconds": round(time.perf_counter() - start, 2)}))


def kernels_of(process: psutil.Process) -> list[psutil.Process]:
    try:
        return [c for c in process.children(recursive=True) if "ipykernel" in " ".join(c.cmdline())]
    except psutil.Error:
        return []


def room(notebook: str, learners: int) -> dict:
    """`learners` workers at once; their kernels' memory sampled until the last one ends."""
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    start = time.perf_counter()
    workers = [subprocess.Popen([sys.executable, __file__, "--worker", notebook], stdout=subprocess.PIPE, text=True, env=env)
               for _ in range(learners)]
    handles = [psutil.Process(w.pid) for w in workers]
    peak_one, peak_total, system_low = 0.0, 0.0, psutil.virtual_memory().available
    try:
        while any(w.poll() is None for w in workers):
            total = 0.0
            for handle in handles:
                for kernel in kernels_of(handle):
                    try:
                        rss = kernel.memory_info().rss / 2**20
                    except psutil.Error:
                        continue
                    peak_one, total = max(peak_one, rss), total + rss
            peak_total = max(peak_total, total)
            system_low = min(system_low, psutil.virtual_memory().available)
            time.sleep(0.05)
        wall = time.perf_counter() - start
        seconds = [json.loads(w.stdout.read().strip().splitlines()[-1])["seconds"] for w in workers]
    finally:
        for w in workers:
            if w.poll() is None:
                w.kill()
                w.wait()
    return {
        "notebook": notebook, "kernels": learners, "wall_s": round(wall, 1),
        "notebook_s": {"min": min(seconds), "max": max(seconds)},
        "peak_kernel_mb": round(peak_one), "peak_total_kernels_mb": round(peak_total),
        "machine_available_min_mb": round(system_low / 2**20),
    }


def lab_server_mb() -> int:
    """Resident memory of an idle JupyterLab server (what a hub or Binder runs per learner)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    token = secrets.token_hex(16)
    command = [sys.executable, "-m", "jupyterlab", "--no-browser", "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}",
               f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={ROOT}", "--LabApp.news_url=None"]
    if os.geteuid() == 0:
        command.append("--allow-root")
    server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/api/status?token={token}", timeout=3)
                break
            except OSError:
                time.sleep(0.5)
        urllib.request.urlopen(f"http://127.0.0.1:{port}/lab?token={token}", timeout=30).read()  # the page, once
        time.sleep(2)
        return round(psutil.Process(server.pid).memory_info().rss / 2**20)
    finally:
        server.terminate()
        try:
            server.wait(20)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--worker")
    parser.add_argument("--rooms", type=int, nargs="*", default=[5, 10])
    args = parser.parse_args()
    if args.worker:
        return worker(args.worker)
    record: dict = {"command": "python benchmarks/classroom.py", "binder_limit_mb": BINDER_MB}
    record["lab_server_idle_mb"] = lab_server_mb()
    print(f"JupyterLab server, idle: {record['lab_server_idle_mb']} MB", flush=True)
    record["alone"] = {}
    for notebook in (START_HERE, EXPLORER):
        run = room(notebook, 1)
        run["with_server_mb"] = run["peak_kernel_mb"] + record["lab_server_idle_mb"]
        run["fits_binder"] = run["with_server_mb"] <= BINDER_MB
        record["alone"][notebook] = run
        print(f"{notebook}: {run['notebook_s']['max']} s, kernel peak {run['peak_kernel_mb']} MB, "
              f"+ server = {run['with_server_mb']} MB of Binder's {BINDER_MB}", flush=True)
    record["rooms"] = []
    for learners in args.rooms:
        run = room(EXPLORER, learners)
        record["rooms"].append(run)
        print(f"{learners} kernels at once on {EXPLORER}: wall {run['wall_s']} s, each {run['notebook_s']}, "
              f"kernels' total peak {run['peak_total_kernels_mb']} MB", flush=True)
    record["machine"] = (f"{platform.machine()}, {psutil.cpu_count()} cores, {round(psutil.virtual_memory().total / 2**30)} GiB, "
                         f"Python {platform.python_version()}")
    record["load_note"] = "measured on the shared 2-core machine while other engineers were running their own tests"
    record["date"] = time.strftime("%Y-%m-%d %H:%M")
    RESULT.parent.mkdir(exist_ok=True)
    RESULT.write_text(json.dumps(record, indent=2) + "\n")
    print(f"written to {RESULT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
