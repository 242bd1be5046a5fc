"""The README's `make lab` without make (Windows without WSL, or any machine without make):

    python tools/setup_lab.py                  # = make lab: .venv, the learner set, JupyterLab on start-here
    python tools/setup_lab.py --torch cpu      # = make lab TORCH=cpu (CPU-only torch, Linux)
    python tools/setup_lab.py --wheels DIR     # = make lab WHEELS=DIR (no network: a `make wheelhouse` folder)
    python tools/setup_lab.py --install-only   # = make install (set up, start nothing)
    python tools/setup_lab.py --dry-run        # print the commands a fresh set-up runs (make -n -B lab)

Standard library only; the Makefile's steps and stamp files (tests/test_no_make.py holds them equal).
"""
from __future__ import annotations

import argparse
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VENV = ROOT / ".venv"
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"
DRY_RUN = False  # --dry-run: print each command as a fresh set-up would run it, run none


def venv_bin(venv: Path, name: str, windows: bool = os.name == "nt") -> Path:
    """A program of the venv: Scripts\\NAME.exe on Windows, bin/NAME elsewhere."""
    return venv / "Scripts" / f"{name}.exe" if windows else venv / "bin" / name


def pip_install(python: Path, wheels: str | None = None) -> list[str]:
    """The Makefile's $(PIP): pip install with progress, from a wheel folder only when one is given."""
    offline = ["--no-index", "--find-links", wheels] if wheels else []
    return [str(python), "-m", "pip", "install", "--progress-bar", "on", *offline]


def torch_version(root: Path = ROOT) -> str:
    return re.search(r"^torch==(\S+)", (root / "requirements.txt").read_text(), re.M)[1]


def _stale(stamp: Path, *sources: Path) -> bool:
    return DRY_RUN or not stamp.exists() or any(s.stat().st_mtime > stamp.stat().st_mtime for s in sources)


def show(command: list[str], extra_env: dict | None = None) -> str:
    """A command as a POSIX shell would read it, its extra environment first (as make prints it)."""
    return " ".join([*(f"{k}={v}" for k, v in (extra_env or {}).items()), shlex.join(command)])


def _run(command: list[str], extra_env: dict | None = None) -> int:
    """Run `command` in the checkout (or only print it, --dry-run); its exit status."""
    print(show(command, extra_env) if DRY_RUN else "+ " + show(command, extra_env), flush=True)
    if DRY_RUN:
        return 0
    return subprocess.run(command, cwd=ROOT, env={**os.environ, **(extra_env or {})}).returncode


def _must(command: list[str]) -> None:
    status = _run(command)
    if status:
        raise SystemExit(status)


def install(venv: Path = VENV, torch: str | None = None, wheels: str | None = None) -> Path:
    """`make install`: the venv and the learner set (requirements.txt); returns the venv's python."""
    python, stamp = venv_bin(venv, "python"), venv / ".installed"
    if not _stale(stamp, ROOT / "requirements.txt", ROOT / "pyproject.toml"):
        return python
    _must([sys.executable, "tools/install_notice.py", "learner", *(["--torch", torch] if torch else [])])
    if DRY_RUN or not python.exists():
        _must([sys.executable, "-m", "venv", str(venv)])
    if torch == "cpu":
        version = torch_version()
        print(f"--- torch {version}+cpu from {TORCH_CPU_INDEX} (a CPU-only build, Linux)", flush=True)
        if _run([*pip_install(python, wheels), "--extra-index-url", TORCH_CPU_INDEX, f"torch=={version}+cpu"]):
            print(f"Could not install torch {version}+cpu from {TORCH_CPU_INDEX} (unreachable from here?).\n"
                  "Run plain `python tools/setup_lab.py` instead: it takes torch from PyPI.", flush=True)
            raise SystemExit(1) from None
    print("--- the learner set: requirements.txt", flush=True)
    _must([*pip_install(python, wheels), "-r", "requirements.txt"])
    if not DRY_RUN:
        stamp.touch()
    return python


def install_test(venv: Path = VENV, wheels: str | None = None) -> Path:
    """`make install-test`: the learner set, then the test tools (requirements-test.txt) and, with npm, the site's KaTeX."""
    python = install(venv, wheels=wheels)
    stamp = venv / ".installed-test"
    if _stale(stamp, ROOT / "requirements-test.txt", ROOT / "site" / "package-lock.json", venv / ".installed"):
        _must([sys.executable, "tools/install_notice.py", "test"])
        _must([*pip_install(python, wheels), "-r", "requirements-test.txt"])
        npm = shutil.which("npm")  # npm.cmd on Windows: the full path runs it
        if npm:  # KaTeX for the book site's math test, from site/package-lock.json
            _must([npm, "ci", "--no-audit", "--no-fund", "--prefix", "site"])
        else:
            print("npm not found: tests/site/test_math.py will be skipped (install Node.js and npm)")
        if not DRY_RUN:
            stamp.touch()
    return python


def lab_command(python: Path) -> list[str]:
    """`make lab`'s last line; JupyterLab refuses to start as root unless told it may (LAB_FLAGS)."""
    as_root = hasattr(os, "geteuid") and os.geteuid() == 0
    return [str(python), "tools/lab.py", *(["--allow-root"] if as_root else [])]


def start_lab(python: Path) -> int:
    """Run tools/lab.py until it ends; Ctrl+C reaches it too, and it stops its server: wait for that."""
    if DRY_RUN:
        return _run(lab_command(python))
    process = subprocess.Popen(lab_command(python), cwd=ROOT)
    while True:
        try:
            return process.wait()
        except KeyboardInterrupt:
            continue


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--torch", choices=["cpu"], help="CPU-only torch from PyTorch's CPU wheel index (Linux)")
    parser.add_argument("--wheels", help="install with no network from this folder (made by `make wheelhouse`)")
    parser.add_argument("--install-only", action="store_true", help="set up the environment, start nothing")
    parser.add_argument("--dry-run", action="store_true", help="print the commands of a fresh set-up, run none")
    args = parser.parse_args(argv)
    global DRY_RUN
    DRY_RUN = args.dry_run
    python = install(torch=args.torch, wheels=args.wheels)
    return 0 if args.install_only else start_lab(python)


if __name__ == "__main__":
    sys.exit(main())
