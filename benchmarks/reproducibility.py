"""Do the committed notebook outputs reproduce on another CPU? nbval over every notebook, once per leg:
torch's CPU kernels forced to one instruction set (ATEN_CPU_CAPABILITY) x 1 or 2 threads.

    python benchmarks/reproducibility.py                       # every leg this CPU can run
    python benchmarks/reproducibility.py --legs default:1 avx2:2
    python benchmarks/reproducibility.py --budget-s 1200       # start no leg after 20 minutes

Writes benchmarks/results/reproducibility.json: each leg with its passed and failed counts and
seconds, or why it was skipped (the CPU lacks the instruction set) or not run (out of budget,
or not asked for). A leg is a plain `pytest notebooks` run; its kernels inherit the variables.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULT = ROOT / "benchmarks" / "results" / "reproducibility.json"
# ATEN_CPU_CAPABILITY value -> the /proc/cpuinfo flag the CPU needs for it (default: plain code, any CPU)
CAPABILITIES = {"default": None, "avx2": "avx2", "avx512": "avx512f"}
THREADS = (1, 2)
ALL_LEGS = [f"{cap}:{n}" for cap in CAPABILITIES for n in THREADS]


def cpu_flags() -> set[str]:
    """The flags of the first processor in /proc/cpuinfo (Linux); empty elsewhere."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return set()
    match = re.search(r"^flags\s*:(.*)$", text, re.MULTILINE)
    return set(match.group(1).split()) if match else set()


def run_leg(capability: str, threads: int) -> dict:
    """nbval over notebooks/ with torch held to `capability` and `threads` threads."""
    env = dict(os.environ, ATEN_CPU_CAPABILITY=capability, OMP_NUM_THREADS=str(threads),
               MKL_NUM_THREADS=str(threads))
    command = [sys.executable, "-m", "pytest", "notebooks", "-q", "-p", "no:cacheprovider", "-rf"]
    start = time.perf_counter()
    run = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
    seconds = round(time.perf_counter() - start, 1)
    counts = {word: int(n) for n, word in re.findall(r"(\d+) (passed|failed|error|errors|skipped)", run.stdout)}
    failed = sorted({line.split(" ", 1)[1].split(" - ")[0] for line in run.stdout.splitlines()
                     if line.startswith(("FAILED ", "ERROR "))})  # "FAILED notebooks/x.ipynb::Cell 7 - ..."
    return {"status": "passed" if run.returncode == 0 else "failed", "passed": counts.get("passed", 0),
            "failed": counts.get("failed", 0) + counts.get("error", 0) + counts.get("errors", 0),
            "failed_cells": failed, "seconds": seconds, "returncode": run.returncode}


def tree_state() -> dict:
    """The commit the legs ran on, and which tracked files differed from it (a leg tests the tree)."""
    def git(*args: str) -> str:
        run = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True)
        return run.stdout if run.returncode == 0 else ""  # not stripped: a status line starts with a space
    return {"commit": git("rev-parse", "HEAD").strip(),
            "changed_files": sorted(line[3:] for line in git("status", "--porcelain", "--untracked-files=no").splitlines())}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--legs", nargs="+", default=ALL_LEGS, metavar="CAPABILITY:THREADS",
                        help=f"legs to run, of {' '.join(ALL_LEGS)} (default: all)")
    parser.add_argument("--budget-s", type=float, default=None,
                        help="start no new leg once this many seconds have passed (the rest: not run)")
    args = parser.parse_args(argv)
    unknown = [leg for leg in args.legs if leg not in ALL_LEGS]
    if unknown:
        parser.error(f"--legs: {' '.join(unknown)} not among {' '.join(ALL_LEGS)}")
    if args.budget_s is not None and args.budget_s <= 0:
        parser.error(f"--budget-s must be > 0 seconds, got {args.budget_s}")

    flags = cpu_flags()
    tree = tree_state()
    start = time.perf_counter()
    legs = []
    for leg in ALL_LEGS:
        capability, threads = leg.split(":")
        record = {"leg": leg, "ATEN_CPU_CAPABILITY": capability, "threads": int(threads)}
        needs = CAPABILITIES[capability]
        if needs is not None and needs not in flags:
            record |= {"status": "skipped", "reason": f"this CPU lacks the {needs} flag (/proc/cpuinfo)"}
        elif leg not in args.legs:
            record |= {"status": "not run", "reason": "not asked for (--legs)"}
        elif args.budget_s is not None and time.perf_counter() - start > args.budget_s:
            record |= {"status": "not run", "reason": f"past the time budget (--budget-s {args.budget_s:g})"}
        else:
            print(f"--- {leg}: nbval over notebooks/ ...", flush=True)
            record |= run_leg(capability, int(threads))
            print(f"    {record['status']}: {record['passed']} passed, {record['failed']} failed, "
                  f"{record['seconds']} s {' '.join(record['failed_cells'])}", flush=True)
        legs.append(record)

    ran = [leg for leg in legs if leg["status"] in ("passed", "failed")]
    result = {
        "command": "python benchmarks/reproducibility.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "what": "nbval over every notebook, torch held to one CPU instruction set (ATEN_CPU_CAPABILITY) "
                "and 1 or 2 threads (OMP_NUM_THREADS, MKL_NUM_THREADS)",
        "all_passed": bool(ran) and all(leg["status"] == "passed" for leg in ran),
        "legs_run": len(ran),
        "legs_not_run": [leg["leg"] for leg in legs if leg["status"] == "not run"],
        "legs_skipped": [leg["leg"] for leg in legs if leg["status"] == "skipped"],
        "legs": legs,
        "tree": tree,
        "cpu_flags": sorted(flags & {"avx2", "avx512f"}),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
        "date": time.strftime("%Y-%m-%d %H:%M"),
    }
    RESULT.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {RESULT.relative_to(ROOT)}")
    return 0 if result["all_passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
