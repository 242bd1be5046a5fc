"""codespell (requirements-test.txt) over what a reader reads: the notebooks, the README and the instructor pages."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# Read as blank: a picture's base64 (PNG bytes read as words) and inline maths ($p_{te}$ is no typo).
IGNORE = r"[A-Za-z0-9+/]{60,}=*|\$[^$]+\$"


def test_codespell_finds_no_typo():
    spell = subprocess.run([sys.executable, "-m", "codespell_lib", "--ignore-regex", IGNORE, "notebooks",
                            "README.md", "instructor"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert spell.returncode == 0, spell.stdout + spell.stderr


def test_codespell_would_catch_one(tmp_path):
    (tmp_path / "a.md").write_text("The gradient is acumulated in .grad.\n")
    spell = subprocess.run([sys.executable, "-m", "codespell_lib", str(tmp_path)], capture_output=True, text=True)
    assert spell.returncode != 0 and "acumulated" in spell.stdout
