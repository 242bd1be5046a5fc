"""The README's `make test` without make (Windows without WSL, or any machine without make):

    python tools/run_tests.py            # = make test: the test tools, the linter, every test, the second CPU leg
    python tools/run_tests.py --check    # = make check: the linter, then the unit tests only
    python tools/run_tests.py --dry-run  # print the test steps, run none (make -n -o install-test test)

The Makefile's `test` and `check` steps (tests/test_no_make.py holds them equal); stops at the first that fails.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import setup_lab
from setup_lab import VENV, install_test, show, venv_bin

LINTED = ["widgets", "tests", "tools", "benchmarks", "instructor", "present", "hub", "site", "conftest.py"]
# The second pass (the Makefile's CPU_LEG): torch's plain CPU kernels and MKL's SSE4.2 path.
CPU_LEG = {"ATEN_CPU_CAPABILITY": "default", "MKL_ENABLE_INSTRUCTIONS": "SSE4_2"}
XDIST = ["-n", "3", "--dist", "loadfile"]  # the Makefile's XDIST: three test processes; a file's tests in one


def steps(venv: Path = VENV, check: bool = False, windows: bool = os.name == "nt") -> list[tuple[dict, list[str]]]:
    """(extra environment, command) of each step of `make test` (or `make check`), in order."""
    python = str(venv_bin(venv, "python", windows))
    lint = [({}, [str(venv_bin(venv, "ruff", windows)), "check", *LINTED]),
            ({}, [str(venv_bin(venv, "lint-imports", windows)), "--no-logo", "--no-cache"])]
    if check:
        return [*lint, ({}, [python, "-m", "pytest", "tests", "-m", "not browser and not slow", *XDIST])]
    return [*lint, ({}, [python, "-m", "pytest", *XDIST]),
            (CPU_LEG, [python, "-m", "pytest", "notebooks", "tests", "-m", "notebook or rounding", *XDIST, "-q", "-p",
                       "no:cacheprovider"])]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="the linter and the unit tests only (make check)")
    parser.add_argument("--wheels", help="install with no network from this folder (made by `make wheelhouse`)")
    parser.add_argument("--dry-run", action="store_true", help="print the test steps, run none")
    args = parser.parse_args(argv)
    if args.dry_run:
        print("\n".join(show(command, extra) for extra, command in steps(check=args.check)))
        return 0
    install_test(wheels=args.wheels)
    for extra, command in steps(check=args.check):
        status = setup_lab._run(command, extra)
        if status:
            return status
    return 0


if __name__ == "__main__":
    sys.exit(main())
