"""`make quick LESSON=<lesson>`: the unit tests of one lesson, of the shared parts it imports and the tree's rules.

    python tools/quick.py researcher_7   # tests/lessons/researcher_7, the shared parts it imports, the tree rules
    python tools/quick.py                # every shared part's unit tests and the tree rules
"""
from __future__ import annotations

import ast
import os
import subprocess
import sys
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
    paths = [*RULES, *(f"tests/{part}" for part in (shared_parts_of(lesson) if lesson else SHARED))]
    if lesson:
        paths.insert(0, f"tests/lessons/{lesson}")
    print(f"quick: {lesson or 'the shared parts'}: {' '.join(paths)}", flush=True)
    # as make check: no browser, nothing slow, three test processes
    return subprocess.run([sys.executable, "-m", "pytest", *paths, "-m", "not browser and not slow", "-q",
                           "-n", "3", "--dist", "loadfile", "-p", "no:cacheprovider"], cwd=ROOT).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
