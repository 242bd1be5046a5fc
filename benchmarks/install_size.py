"""Size and time of the two installs (`make lab`, then what `make test` adds), each in a fresh venv in /tmp.

    python benchmarks/install_size.py

pip's cache off; sized with `du`. Writes benchmarks/results/install.json (tools/install_notice.py reads it).
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
RESULT = ROOT / "benchmarks" / "results" / "install.json"

from check_binder_env import copy_repository  # noqa: E402  (this folder is on sys.path: run as a script)


def du_mb(path: Path) -> int:
    return int(subprocess.run(["du", "-sm", str(path)], capture_output=True, text=True, check=True).stdout.split()[0])


def pip_install(venv: Path, requirements: str, repo: Path) -> tuple[float, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    start = time.perf_counter()
    result = subprocess.run([venv / "bin" / "python", "-m", "pip", "install", "--no-cache-dir", "-r", requirements],
                            cwd=repo, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if result.returncode != 0:
        raise SystemExit(f"pip install -r {requirements} failed:\n{(result.stdout + result.stderr)[-3000:]}")
    return seconds, result.stdout


def main() -> None:
    work = Path(tempfile.mkdtemp(prefix="install-size-"))
    try:
        repo, venv = work / "repo", work / "venv"
        copy_repository(repo)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        empty = du_mb(venv)
        record: dict = {"command": "python benchmarks/install_size.py", "empty_venv_mb": empty}
        for which, requirements in (("learner", "requirements.txt"), ("test", "requirements-test.txt")):
            before = du_mb(venv)
            seconds, log = pip_install(venv, requirements, repo)
            after = du_mb(venv)
            torch = subprocess.run([venv / "bin" / "python", "-c", "import torch; print(torch.__version__, torch.version.cuda)"],
                                   capture_output=True, text=True).stdout.split()
            record[which] = {
                "requirements": requirements,
                "seconds": round(seconds, 1),
                "venv_mb": after,
                "added_mb": after - before,
                "packages_installed": len(log.split("Successfully installed", 1)[-1].split()) if "Successfully installed" in log else 0,
                "torch_build": "CPU" if torch[1:] == ["None"] else f"CUDA {torch[1:]}",
                "torch_version": torch[0] if torch else None,
            }
            print(f"{which}: {record[which]['seconds']} s, .venv {after} MB (+{after - before} MB), "
                  f"{record[which]['packages_installed']} packages, torch {record[which]['torch_build']}", flush=True)
        sizes = subprocess.run(["du", "-sm", *map(str, (venv / "lib").glob("python*/site-packages/*"))],
                               capture_output=True, text=True).stdout.splitlines()
        biggest = sorted(((int(s.split()[0]), Path(s.split()[1]).name) for s in sizes), reverse=True)[:8]
        record["biggest_mb"] = {name: mb for mb, name in biggest}
        record["pip"] = "cache off; wheels from this machine's package mirror on local disk, else PyPI"
        record["machine"] = f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
        record["date"] = time.strftime("%Y-%m-%d %H:%M")
        RESULT.parent.mkdir(exist_ok=True)
        RESULT.write_text(json.dumps(record, indent=2) + "\n")
        print(f"written to {RESULT.relative_to(ROOT)}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
