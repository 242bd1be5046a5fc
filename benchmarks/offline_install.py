"""The offline plan, run: `make wheelhouse` in a copy, then the learner set installed with `--no-index`.

    python benchmarks/offline_install.py      # -> benchmarks/results/offline_install.json
"""
from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULT = ROOT / "benchmarks" / "results" / "offline_install.json"

from check_binder_env import copy_repository  # noqa: E402  (this folder is on sys.path: run as a script)
from install_size import du_mb  # noqa: E402


def run(command: list, **kwargs) -> float:
    start = time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True, **kwargs)
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(map(str, command))} failed:\n{(result.stdout + result.stderr)[-3000:]}")
    return round(time.perf_counter() - start, 1)


def main() -> None:
    work = Path(tempfile.mkdtemp(prefix="offline-"))
    try:
        repo = work / "repo"
        copy_repository(repo)
        wanted = [ln for ln in (repo / "requirements.txt").read_text().splitlines() if not ln.startswith("-e ")]
        (work / "learner-wheels.txt").write_text("\n".join(wanted) + "\n")
        download_s = run([sys.executable, "-m", "pip", "download", "--no-cache-dir", "-q", "-d", repo / "wheelhouse",
                          "-r", work / "learner-wheels.txt", "setuptools>=77", "wheel"])
        venv = work / "venv"
        run([sys.executable, "-m", "venv", venv])
        offline = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")} | {"PIP_CONFIG_FILE": os.devnull}
        install_s = run([venv / "bin" / "python", "-m", "pip", "install", "--no-cache-dir", "--no-index",
                         "--find-links", "wheelhouse", "-r", "requirements.txt"], cwd=repo, env=offline)
        run([venv / "bin" / "python", "-c", "import widgets, torch, ipywidgets, voila, widgets.lab.doctor"], cwd=work)
        record = {
            "command": "python benchmarks/offline_install.py",
            "wheelhouse": {"seconds": download_s, "mb": du_mb(repo / "wheelhouse"),
                           "files": len(list((repo / "wheelhouse").iterdir()))},
            "offline_install": {"seconds": install_s, "venv_mb": du_mb(venv), "imports": "widgets, torch, ipywidgets, voila: ok"},
            "note": "the torch wheel in the folder is this machine's (the CPU build); pip's index and config files off",
            "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
            "date": time.strftime("%Y-%m-%d %H:%M"),
        }
        RESULT.write_text(json.dumps(record, indent=2) + "\n")
        print(json.dumps(record, indent=2))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
