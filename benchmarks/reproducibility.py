"""Do the committed notebook outputs reproduce on another CPU code path? nbval over every notebook, once per leg.

    python benchmarks/reproducibility.py                       # every leg this CPU can run
    python benchmarks/reproducibility.py --legs default:1 cbwr-auto:2
    python benchmarks/reproducibility.py --budget-s 1200       # start no leg after 20 minutes

A leg pins ATen's kernels (ATEN_CPU_CAPABILITY) and MKL's (MKL_ENABLE_INSTRUCTIONS on Intel, MKL_CBWR on
AMD, where MKL ignores the former), with 1 and 2 threads. Writes benchmarks/results/reproducibility.json.
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
# leg -> (the variables it sets, the /proc/cpuinfo flag the CPU needs for it, or None: any x86 CPU)
PATHS: dict[str, tuple[dict[str, str], str | None]] = {
    "native": ({}, None),  # what this CPU picks by itself
    "default": ({"ATEN_CPU_CAPABILITY": "default", "MKL_ENABLE_INSTRUCTIONS": "SSE4_2"}, None),  # make test's leg
    "avx2": ({"ATEN_CPU_CAPABILITY": "avx2", "MKL_ENABLE_INSTRUCTIONS": "AVX2"}, "avx2"),
    "avx512": ({"ATEN_CPU_CAPABILITY": "avx512", "MKL_ENABLE_INSTRUCTIONS": "AVX512"}, "avx512f"),
    # MKL's reproducible paths: COMPATIBLE is the same code on every x86 CPU; AUTO picks a fixed path per
    # CPU family (on this project's AMD machine it gave the float32 digits an AVX512 machine printed)
    "cbwr-compatible": ({"ATEN_CPU_CAPABILITY": "default", "MKL_CBWR": "COMPATIBLE"}, None),
    "cbwr-auto": ({"MKL_CBWR": "AUTO"}, None),
}
THREADS = (1, 2)
ALL_LEGS = [f"{path}:{n}" for path in PATHS for n in THREADS]


def cpu_flags() -> set[str]:
    """The flags of the first processor in /proc/cpuinfo (Linux); empty elsewhere."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return set()
    match = re.search(r"^flags\s*:(.*)$", text, re.MULTILINE)
    return set(match.group(1).split()) if match else set()


def run_leg(path: str, threads: int) -> dict:
    """nbval over notebooks/ with torch held to the code path `path` (PATHS) and `threads` threads."""
    clean = {k: v for k, v in os.environ.items()
             if k not in ("ATEN_CPU_CAPABILITY", "MKL_ENABLE_INSTRUCTIONS", "MKL_CBWR")}
    env = dict(clean, **PATHS[path][0], OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
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


def cpu_model() -> str:
    """The vendor and model name of the first processor (MKL treats Intel and AMD CPUs differently)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.processor() or "unknown"
    fields = dict(re.findall(r"^(vendor_id|model name)\s*:\s*(.*)$", text, re.MULTILINE))
    return " ".join(fields.get(k, "") for k in ("vendor_id", "model name")).strip() or "unknown"


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
        path, threads = leg.split(":")
        variables, needs = PATHS[path]
        record = {"leg": leg, "variables": variables, "threads": int(threads)}
        if needs is not None and needs not in flags:
            record |= {"status": "skipped", "reason": f"this CPU lacks the {needs} flag (/proc/cpuinfo)"}
        elif leg not in args.legs:
            record |= {"status": "not run", "reason": "not asked for (--legs)"}
        elif args.budget_s is not None and time.perf_counter() - start > args.budget_s:
            record |= {"status": "not run", "reason": f"past the time budget (--budget-s {args.budget_s:g})"}
        else:
            print(f"--- {leg}: nbval over notebooks/ ...", flush=True)
            record |= run_leg(path, int(threads))
            print(f"    {record['status']}: {record['passed']} passed, {record['failed']} failed, "
                  f"{record['seconds']} s {' '.join(record['failed_cells'])}", flush=True)
        legs.append(record)

    ran = [leg for leg in legs if leg["status"] in ("passed", "failed")]
    result = {
        "command": "python benchmarks/reproducibility.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "what": "nbval over every notebook, torch's ATen kernels and Intel MKL each held to one code path "
                "(ATEN_CPU_CAPABILITY, MKL_ENABLE_INSTRUCTIONS, MKL_CBWR) and 1 or 2 threads "
                "(OMP_NUM_THREADS, MKL_NUM_THREADS)",
        "all_passed": bool(ran) and all(leg["status"] == "passed" for leg in ran),
        "legs_run": len(ran),
        "legs_not_run": [leg["leg"] for leg in legs if leg["status"] == "not run"],
        "legs_skipped": [leg["leg"] for leg in legs if leg["status"] == "skipped"],
        "legs": legs,
        "tree": tree,
        "cpu_flags": sorted(flags & {"avx2", "avx512f"}),
        "cpu": cpu_model(),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
        "date": time.strftime("%Y-%m-%d %H:%M"),
    }
    RESULT.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {RESULT.relative_to(ROOT)}")
    return 0 if result["all_passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
