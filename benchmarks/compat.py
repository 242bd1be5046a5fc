"""`make compat`: every notebook in the environments learners already have, checked by nbval.

    python benchmarks/compat.py                                   # both profiles, every notebook
    python benchmarks/compat.py --profile colab --notebooks notebooks/00_start_here.ipynb
    python benchmarks/compat.py --find-links DIR                  # wheels already on disk (torch's are GBs)

Profiles "colab" (requirements-colab.txt: ipywidgets 7) and "newest", each a fresh venv in /tmp; the lab
installed as the notebooks' install cell does; nbval from a copy outside the checkout, with
benchmarks/compat_sanitize.cfg and compat_nbval.py. Writes benchmarks/results/compat.json. Not in CI.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "compat.json"
SANITIZE = ROOT / "benchmarks" / "compat_sanitize.cfg"
PLUGIN = ROOT / "benchmarks" / "compat_nbval.py"
from check_binder_env import copy_repository  # noqa: E402  (this folder is on sys.path: run as a script)

NOTEBOOKS = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "notebooks").glob("*.ipynb"))
# what the notebooks and nbval need, unpinned: the newest pip offers, beside the newest torch here
NEWEST = ["torch==2.14.1", "numpy", "matplotlib", "pillow", "tqdm", "ipywidgets", "ipykernel", "nbformat",
          "nbconvert", "nbclient", "accelerate", "pytest", "nbval"]
PROFILES = {
    "colab": {"describe": "Colab-like: requirements-colab.txt (ipywidgets 7.7.1, torch 2.11.0)",
              "install": ["-r", str(ROOT / "requirements-colab.txt")]},
    "newest": {"describe": "newest: torch 2.14.1, everything else the newest pip offers", "install": NEWEST},
}
# the versions the JSON records (pip list has them all; these decide what a notebook prints)
REPORTED = ("torch", "numpy", "matplotlib", "pillow", "tqdm", "ipywidgets", "widgetsnbextension",
            "jupyterlab_widgets", "notebook", "ipykernel", "ipython", "jupyter_client", "traitlets", "nbclient",
            "nbval", "pytest", "accelerate", "pytorch-lightning", "torchmetrics", "lightning-utilities",
            "gradient-accumulation-lab")
CELL_TIMEOUT_S = 300  # a loaded 2-core machine; the notebooks' own budgets are in the README
NOTEBOOK_TIMEOUT_S = 1800


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def run(command: list[str], log: Path, **kwargs) -> subprocess.CompletedProcess:
    """Run `command`, its output appended to `log`; the caller reads the status."""
    with open(log, "a") as out:
        out.write(f"\n$ {' '.join(command)}\n")
        out.flush()
        return subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, text=True, **kwargs)


def clean_env(python: Path) -> dict[str, str]:
    """This process's environment for the profile: its venv first on PATH, nothing that would point a
    kernel elsewhere or make the install cell believe it is on Colab or Kaggle."""
    drop = {"VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "COLAB_RELEASE_TAG", "KAGGLE_KERNEL_RUN_TYPE"}
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env["PATH"] = f"{python.parent}{os.pathsep}{env.get('PATH', '')}"
    return env


def torch_requirement(name: str) -> str:
    """The profile's torch, as its install names it (`torch==X`)."""
    install = PROFILES[name]["install"]
    lines = Path(install[1]).read_text().splitlines() if install[0] == "-r" else install
    return next(line.split("#")[0].strip() for line in lines if re.match(r"torch\s*==", line))


def build_profile(name: str, folder: Path, find_links: list[str], log: Path) -> tuple[Path, float]:
    """A fresh venv at `folder` with the profile installed; (its python, seconds)."""
    start = time.monotonic()
    shutil.rmtree(folder, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "venv", str(folder)], check=True)
    python = folder / "bin" / "python"
    links = [arg for d in find_links for arg in ("--find-links", d)]
    if links:  # pip does not prefer a folder's wheel to the index's: torch and its nvidia-* from the folder first
        run([str(python), "-m", "pip", "install", "--progress-bar", "off", "--no-index", *links, torch_requirement(name)],
            log, env=clean_env(python))  # a failure is fine: the install below then downloads them
    done = run([str(python), "-m", "pip", "install", "--progress-bar", "off", *links, *PROFILES[name]["install"]],
               log, env=clean_env(python))
    if done.returncode:
        raise SystemExit(f"{name}: installing the profile failed (exit {done.returncode}); see {log}")
    return python, time.monotonic() - start


def install_lab(python: Path, folder: Path, log: Path) -> dict:
    """The lab's package as the install cell installs it: --no-deps from the source, then install_missing()."""
    source = folder / "lab-source"
    shutil.rmtree(source, ignore_errors=True)
    copy_repository(source)  # what a clone at a tag holds: the install cell's pip builds from it
    env = clean_env(python)
    done = run([str(python), "-m", "pip", "install", "--progress-bar", "off", "--no-deps", str(source)], log, env=env)
    if done.returncode:
        raise SystemExit(f"installing the lab's package failed (exit {done.returncode}); see {log}")
    cell = subprocess.run([str(python), "-c", "from widgets.lab.hosts import install_missing; install_missing()"],
                          capture_output=True, text=True, env=env, cwd=folder)
    with open(log, "a") as out:
        out.write(cell.stdout + cell.stderr)
    if cell.returncode:
        raise SystemExit(f"install_missing() failed: {cell.stderr.strip()[-500:]}")
    return {"install_missing_said": said(cell.stdout)}


def said(output: str) -> str:
    """What install_missing() itself printed, without pip's lines."""
    return "\n".join(ln for ln in output.splitlines() if ln.startswith(("The lab ", "Not installed", "Colab:")))


def versions(python: Path) -> dict[str, str]:
    listed = subprocess.run([str(python), "-m", "pip", "list", "--format=json"], capture_output=True, text=True,
                            check=True, env=clean_env(python)).stdout
    return {_norm(p["name"]): p["version"] for p in json.loads(listed)}


def run_dir(folder: Path) -> Path:
    """Where nbval runs: the notebooks, the checkout's conftest.py (the test-home redirects, the font cache
    built first), the policy plugin, and a pytest.ini of its own, outside the checkout."""
    where = folder / "run"
    shutil.rmtree(where, ignore_errors=True)
    (where / "notebooks").mkdir(parents=True)
    for notebook in NOTEBOOKS:
        shutil.copy2(ROOT / notebook, where / notebook)
    shutil.copy2(ROOT / "conftest.py", where / "conftest.py")
    shutil.copy2(PLUGIN, where / PLUGIN.name)
    (where / "pytest.ini").write_text(
        "[pytest]\nfilterwarnings =\n    ignore:Overlapping options from comments and metadata:UserWarning\n")
    return where


def failures(junit: Path) -> tuple[int, list[dict]]:
    """(cells run, [{cell, error}] of the failing ones) from pytest's JUnit XML."""
    if not junit.exists():
        return 0, []
    cases = ET.parse(junit).getroot().iter("testcase")
    count, failed = 0, []
    for case in cases:
        count += 1
        for problem in [*case.iter("failure"), *case.iter("error")]:
            number = re.search(r"Cell (\d+)", case.get("name", ""))
            text = (problem.get("message") or "") + "\n" + (problem.text or "")
            failed.append({"cell": int(number[1]) if number else case.get("name"), "error": summary(text)})
    return count, failed


def summary(text: str, limit: int = 1500) -> str:
    """The telling part of a failure: nbval's headline, then what differs or the error (no cell source)."""
    text = re.sub(r"(\x1b|#x1B)\[[0-9;]*m", "", text)
    headline = next((ln for ln in text.splitlines() if re.search(r"Cell \d+: ", ln)), "")
    body = text.split("Traceback:", 1)[1] if "Traceback:" in text else text
    body = body.split("Notebook cell execution failed")[0]  # nbval repeats the whole report once
    lines = [ln.rstrip() for ln in body.splitlines() if ln.strip()]
    errors = [ln for ln in lines if re.match(r"^\w*(Error|Exception)\b", ln.strip())]
    return "\n".join([headline.strip(), *(errors[-2:] if errors and "differ" not in headline else lines[:14])])[:limit]


def run_notebook(python: Path, where: Path, notebook: str) -> dict:
    """One notebook under nbval in the profile: its result, time, failures, masks and warnings."""
    junit, record = where / "junit.xml", where / "cells.jsonl"
    junit.unlink(missing_ok=True)
    record.unlink(missing_ok=True)
    env = {**clean_env(python), "COMPAT_RECORD": str(record)}
    command = [str(python), "-m", "pytest", notebook, "-q", "-p", "no:cacheprovider", "-p", "compat_nbval",
               "--nbval", "--nbval-current-env", f"--nbval-cell-timeout={CELL_TIMEOUT_S}",
               f"--nbval-sanitize-with={SANITIZE}", f"--junitxml={junit}"]
    start = time.monotonic()
    try:
        done = subprocess.run(command, cwd=where, env=env, capture_output=True, text=True, timeout=NOTEBOOK_TIMEOUT_S)
        status, tail = done.returncode, done.stdout[-3000:]
    except subprocess.TimeoutExpired:
        status, tail = "timeout", ""
    seconds = round(time.monotonic() - start, 1)
    cells, failed = failures(junit)
    records = [json.loads(line) for line in record.read_text().splitlines()] if record.exists() else []
    result = "passed" if status == 0 else "failed" if cells else "error"
    entry = {"result": result, "seconds": seconds, "cells_run": cells,
             "cells_compared": len(records), "cells_exact": sum(r["exact"] for r in records), "failed_cells": failed,
             "masked_cells": [{"cell": r["cell"], "masks": r["masks"]} for r in records if r["matched"] and not r["exact"]],
             "warnings": [{"cell": r["cell"], "text": w} for r in records for w in r["warnings"]]}
    if status == "timeout":
        entry["timed_out_after_s"] = NOTEBOOK_TIMEOUT_S
    if result == "error":
        entry["pytest_output"] = tail
    return entry


def machine() -> dict:
    return {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform(),
            "load_average_at_start": [round(x, 2) for x in os.getloadavg()]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", choices=sorted(PROFILES), action="append",
                        help="a profile to run (repeat for several; default: all)")
    parser.add_argument("--notebooks", nargs="+", default=None, help="notebooks/<file>.ipynb to run (default: all)")
    parser.add_argument("--find-links", action="append", default=[], help="a folder of wheels pip may use first")
    parser.add_argument("--folder", default="/tmp/gradient-accumulation-lab-compat",
                        help="where the profiles' venvs go (one folder each)")
    parser.add_argument("--keep", action="store_true", help="keep the venvs after the run")
    parser.add_argument("--reuse", action="store_true", help="reuse a kept venv (skip installing the profile)")
    parser.add_argument("--output", default=str(RESULTS))
    args = parser.parse_args(argv)
    notebooks = args.notebooks or NOTEBOOKS
    unknown = sorted(set(notebooks) - set(NOTEBOOKS))
    if unknown:
        parser.error(f"--notebooks: not a notebook of this lab: {', '.join(unknown)}")
    find_links = [d for d in args.find_links if Path(d).is_dir()]
    output = Path(args.output)
    results = json.loads(output.read_text()) if output.exists() else {}
    results.update({"command": "make compat (python benchmarks/compat.py)",
                    "sanitizer": SANITIZE.relative_to(ROOT).as_posix(), "policy": PLUGIN.relative_to(ROOT).as_posix()})
    results.setdefault("profiles", {})
    status = 0
    for name in args.profile or list(PROFILES):
        folder = Path(args.folder) / name
        log = Path(args.folder) / f"{name}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        python = folder / "bin" / "python"
        print(f"--- {name}: {PROFILES[name]['describe']} (log: {log})", flush=True)
        before = results["profiles"].get(name, {})
        install_s = before.get("install_seconds") if args.reuse else None  # a reused venv: its install's time
        if not (args.reuse and python.exists()):
            python, install_s = build_profile(name, folder, find_links, log)
        lab = install_lab(python, folder, log)
        have = versions(python)
        check = subprocess.run([str(python), "-m", "pip", "check"], capture_output=True, text=True,
                               env=clean_env(python))
        profile = {"describe": PROFILES[name]["describe"], "measured_on": str(datetime.now(timezone.utc).date()),
                   "machine": machine(), "install": [a.replace(f"{ROOT}{os.sep}", "") for a in PROFILES[name]["install"]],
                   "install_seconds": None if install_s is None else round(install_s, 1),
                   "versions": {n: have[_norm(n)] for n in REPORTED if _norm(n) in have},
                   "pip_check": check.stdout.strip().splitlines(), **lab,
                   "notebooks_run": len(notebooks), "complete": len(notebooks) == len(NOTEBOOKS), "notebooks": {}}
        results["profiles"][name] = profile
        where = run_dir(folder)
        for notebook in notebooks:
            entry = run_notebook(python, where, notebook)
            profile["notebooks"][notebook] = entry
            print(f"{name}: {notebook}: {entry['result']} in {entry['seconds']} s"
                  + (f", failing cells {[f['cell'] for f in entry['failed_cells']]}" if entry["failed_cells"] else ""),
                  flush=True)
            status |= entry["result"] != "passed"
            output.write_text(json.dumps(results, indent=2) + "\n")
        if not args.keep:
            shutil.rmtree(folder, ignore_errors=True)
    print(f"written: {output}")
    return status


if __name__ == "__main__":
    sys.exit(main())
