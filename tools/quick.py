"""`make quick LESSON=<lesson>`: the unit tests of one lesson and of the shared parts it uses.

    python tools/quick.py researcher_7   # tests/lessons/researcher_7, the shared parts it imports, the tree rules
    python tools/quick.py                # every shared part's unit tests and the tree rules

The shared parts a lesson uses are read from its files' imports: a lesson that never imports
`widgets.audit` does not wait for the auditor's tests. The rules over the whole tree (layers,
notebook imports, claims, readability, the notebook pages) always run.
Tests marked `slow` or `browser` are left out, as `make check` leaves them out. Two pytest processes
run side by side, one per core of a 2-core machine: the lesson's tests with the tree rules, and the
shared parts' tests (without a lesson: the auditor's, the drawings' and the controls' beside the
rest); each prints its report when it ends. Run with the lab's Python (.venv/bin/python).
"""
from __future__ import annotations

import ast
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = ("core", "lab", "exercises", "draw", "controls", "research", "audit")
RULES = ("tests/test_layers.py", "tests/test_notebook_imports.py",
         "tests/test_claims.py", "tests/test_readability.py", "tests/test_notebook_pages.py")


def lessons() -> list[str]:
    return sorted(p.parent.name for p in (ROOT / "tests" / "lessons").glob("*/__init__.py"))


def shared_parts_of(lesson: str) -> list[str]:
    """The shared parts (`core`, `audit`, ...) the lesson's files import."""
    used = set()
    for path in sorted((ROOT / "widgets" / "lessons" / lesson).glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            for name in names:
                parts = name.split(".")
                if len(parts) > 1 and parts[0] == "widgets" and parts[1] in SHARED:
                    used.add(parts[1])
    return [part for part in SHARED if part in used]


def main(argv: list[str]) -> int:
    if not argv and os.environ.get("QUICK_LESSON"):  # make quick LESSON=... passes it so, unexpanded
        argv = [os.environ["QUICK_LESSON"]]
    if len(argv) > 1 or (argv and argv[0] not in lessons()):
        print(f"usage: make quick [LESSON=<lesson>], the lesson one of: {' '.join(lessons())}", file=sys.stderr)
        return 2
    lesson = argv[0] if argv else None
    if lesson:
        halves = [[f"tests/lessons/{lesson}", *RULES], [f"tests/{part}" for part in shared_parts_of(lesson)]]
    else:
        halves = [["tests/audit", "tests/draw", "tests/controls"],
                  [f"tests/{part}" for part in SHARED if part not in ("audit", "draw", "controls")] + list(RULES)]
    halves = [half for half in halves if half]
    print(f"quick: {lesson or 'the shared parts'}: " + " | ".join(" ".join(half) for half in halves), flush=True)
    return run_side_by_side(halves)


def run_side_by_side(halves: list[list[str]]) -> int:
    """One pytest process per list of paths, all at once; each report printed whole as it ends.
    Returns the first non-zero exit status (0 when all pass); every process started here ends here."""
    runs = []
    try:
        for paths in halves:
            log = tempfile.TemporaryFile("w+")
            command = [sys.executable, "-m", "pytest", *paths, "-m", "not browser and not slow", "-q",
                       "-p", "no:cacheprovider"]
            runs.append((subprocess.Popen(command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, text=True), log))
        codes = []
        for process, log in runs:
            codes.append(process.wait())
            log.seek(0)
            print(log.read(), end="", flush=True)
        return next((code for code in codes if code), 0)
    finally:
        for process, log in runs:
            if process.poll() is None:
                process.kill()
                process.wait()
            log.close()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
