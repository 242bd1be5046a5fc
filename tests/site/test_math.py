"""Every formula of every notebook renders in KaTeX (site/package-lock.json), the renderer of VS Code's notebooks and
MyST sites: `E_\\min` fails there (a command as a bare subscript) though MathJax reads it; `E_{\\min}` works."""
from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from markdown_it import MarkdownIt
from mdit_py_plugins.dollarmath import dollarmath_plugin

from tests.site.pages import markdowns

ROOT = Path(__file__).resolve().parents[2]
KATEX = ROOT / "site" / "node_modules" / "katex"
RENDER = Path(__file__).with_name("katex_render.js")
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
PARSER = MarkdownIt("commonmark").use(dollarmath_plugin)  # how the site reads $...$ and $$...$$ (myst dollarmath)


def formulas(markdown: str) -> list[tuple[str, bool]]:
    """(tex, display) of each formula in `markdown`; code spans and blocks hold none."""
    found = []
    for token in PARSER.parse(markdown):
        for t in [token, *(token.children or [])]:
            if t.type in ("math_inline", "math_block", "math_block_label"):
                found.append((t.content.strip(), t.type != "math_inline"))
    return found


def notebook_formulas(path: Path) -> list[tuple[str, bool, str]]:
    """(tex, display, where) of every formula in the notebook's markdown cells and markdown outputs."""
    return [(tex, display, f"{path.stem} cell {i}") for i, text in markdowns(path) for tex, display in formulas(text)]


def katex_errors(items: list[tuple[str, bool]]) -> list[tuple[int, str]]:
    if shutil.which("node") is None or not KATEX.is_dir():
        pytest.skip("needs Node.js and KaTeX: npm ci --prefix site (make install-test does it)")
    result = subprocess.run(["node", str(RENDER), str(KATEX)], input=json.dumps(items), capture_output=True,
                            text=True, timeout=60, check=True)
    return json.loads(result.stdout)


def test_the_reader_finds_inline_and_display_formulas_and_skips_code():
    assert formulas("a $E_{\\min}$ and `$x$`\n\n$$\nS = 1\n$$\n\n```\n$y$\n```") == [("E_{\\min}", False),
                                                                              ("S = 1", True)]


def test_katex_rejects_a_bare_command_subscript_and_accepts_a_braced_one():
    assert [i for i, _ in katex_errors([("E_\\min", False), ("E_{\\min}", False), ("2/\\lambda_{\\max}", True)])] == [0]


def test_every_formula_of_every_notebook_renders_in_katex():
    items = [f for path in NOTEBOOKS for f in notebook_formulas(path)]
    assert len(items) > 100, "the reader found almost no formulas: has the notebooks' math syntax changed?"
    errors = katex_errors([(tex, display) for tex, display, _ in items])
    assert errors == [], "\n".join(f"{items[i][2]}: ${items[i][0]}$: {message}" for i, message in errors)
