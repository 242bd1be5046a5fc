"""Say what `make lab` / `make test` is about to install, and roughly how big and how long.

    python3 tools/install_notice.py learner [--torch cpu]
    python3 tools/install_notice.py test

Standard library only (it runs before the venv exists); sizes from benchmarks/results/install.json.
"""
from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MEASURED = ROOT / "benchmarks" / "results" / "install.json"


def packages(requirements: Path) -> list[str]:
    names = re.findall(r"^([A-Za-z0-9_.\-]+)==", requirements.read_text(), re.M)
    return names


def notice(which: str, torch: str | None, measured: dict) -> str:
    if which == "learner":
        names = packages(ROOT / "requirements.txt")
        head = f"Installing the learner set (requirements.txt, {len(names)} pinned packages + the lab's own):"
    else:
        names = packages(ROOT / "requirements-test.txt")
        head = f"Adding the test tools (requirements-test.txt): {', '.join(names)}"
    lines = ["", head]
    if which == "learner":
        lines.append("    " + ", ".join(names))
    run = measured.get(which)
    if run:
        lines.append(f"  measured on {measured.get('machine', 'the CI machine')}: {run['venv_mb']:,} MB in .venv, "
                     f"{run['seconds']:.0f} s with every wheel on local disk ({run['torch_build']} torch)")
    if which == "learner" and torch != "cpu":
        lines.append("  torch: on Linux x86_64 PyPI's torch is the CUDA build, several GB to download;"
                     " `make lab TORCH=cpu` takes the small CPU-only build instead.")
    lines.append("  pip prints each package as it goes; downloads show a progress bar.")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("which", choices=("learner", "test"))
    parser.add_argument("--torch", default=None)
    args = parser.parse_args()
    measured = json.loads(MEASURED.read_text()) if MEASURED.exists() else {}
    print(notice(args.which, args.torch, measured), flush=True)


if __name__ == "__main__":
    main()
