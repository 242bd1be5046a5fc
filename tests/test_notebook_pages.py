"""The pages a learner reads (issue 25): what the notebooks show, read from the committed files.

- each loop a notebook defines is the package's function the lab runs, line for line;
- no code a learner is shown (a code cell, or a source a cell displays) holds a bug switch;
- the beginner tier in plain words: no scientific notation, tolerances, ulps, bytes, dtypes or GPUs
  in its prose or outputs; `.grad` piles up within the first third of beginner_1;
- the first developer notebook opens with the loop, the table of mistakes and the auditor on it;
- start-here opens with something to touch, then "Start →", the map, and the rest after;
- printed lines fit the page (no sentence wraps mid-word at 1366 px);
- every checked exercise says what it asks (a kind), and a beginner notebook asks for arithmetic at
  most twice.
"""
from __future__ import annotations

import ast
import importlib.util
import inspect
import json
import re
import sys
from pathlib import Path

import pytest

from widgets.core import loops

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
_spec = importlib.util.spec_from_file_location("benchmark_readability_pages", ROOT / "benchmarks" / "readability.py")
readability = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = readability
_spec.loader.exec_module(readability)

OWNED = list(readability.TARGETS)  # start-here, the beginner and the developer tiers
BEGINNER = ["beginner_1_carrying_bricks", "beginner_2_watch_a_model_learn"]


def _cells(stem: str) -> list[dict]:
    return json.loads((NOTEBOOKS / f"{stem}.ipynb").read_text())["cells"]


def _install(cell: dict) -> bool:
    """The install cell above every notebook (tools/install_cell.py): it does nothing off Colab and Kaggle."""
    return "lab-install" in cell.get("metadata", {}).get("tags", [])


def _text(source: object) -> str:
    return "".join(source) if isinstance(source, list) else str(source or "")


def _outputs(cell: dict) -> list[str]:
    """What a cell shows as text: streams, and every text form of a result (not images, not widgets' ids)."""
    shown = []
    for output in cell.get("outputs", []):
        shown.append(_text(output.get("text")))
        data = output.get("data", {})
        shown += [_text(data.get(kind)) for kind in ("text/plain", "text/markdown", "text/html")]
    return [INLINE_IMAGE_DATA.sub("", s) for s in shown if s]


INLINE_IMAGE_DATA = re.compile(r"data:image/[a-z+]+;base64,[A-Za-z0-9+/=]+")  # a picture's pixels are not its words


# --- the code shown is the code that runs ------------------------------------------------------------

LOOPS = {name: f for name, f in vars(loops).items() if inspect.isfunction(f) and f.__module__ == loops.__name__}


@pytest.mark.parametrize("stem", OWNED)
def test_a_loop_a_notebook_defines_is_the_function_the_lab_runs(stem):
    for cell in _cells(stem):
        if cell["cell_type"] != "code" or _install(cell):
            continue
        tree = ast.parse(_text(cell["source"]))
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and node.name in LOOPS:
                cell_source = ast.get_source_segment(_text(cell["source"]), node)
                assert cell_source == inspect.getsource(LOOPS[node.name]).rstrip("\n"), (stem, node.name)


def test_the_first_developer_notebook_defines_the_correct_loop_itself():
    defined = [cell for cell in _cells("developer_1_proving_equivalence")
               if cell["cell_type"] == "code" and "def train(" in _text(cell["source"])]
    assert len(defined) == 1 and "import torch" in _text(defined[0]["source"])


@pytest.mark.parametrize("stem", sorted(p.stem for p in NOTEBOOKS.glob("*.ipynb")))
def test_no_code_a_learner_is_shown_holds_a_bug_switch(stem):
    for cell in _cells(stem):
        if cell["cell_type"] == "code":
            assert not re.search(r"\bin bugs\b", _text(cell["source"])), stem
            assert not any(re.search(r"\bin bugs\b", shown) for shown in _outputs(cell)), stem


# --- the beginner tier in plain words ----------------------------------------------------------------

NOT_PLAIN = {
    "scientific notation": re.compile(r"\d(?:\.\d+)?[eE][-+]?\d"),
    "a tolerance": re.compile(r"\b(?:rtol|atol|allclose|tolerance)\b"),
    "ulps": re.compile(r"\bulps?\b"),
    "bytes": re.compile(r"\bbytes?\b"),
    "a dtype": re.compile(r"\b(?:b?float(?:16|32|64)|dtype)\b"),
    "a GPU": re.compile(r"\b(?:GPU|CUDA|H100|H200|A100)\b"),
}


@pytest.mark.parametrize("stem", BEGINNER)
def test_the_beginner_tier_says_it_in_plain_words(stem):
    for i, cell in enumerate(_cells(stem)):
        shown = [readability.prose(_text(cell["source"]))] if cell["cell_type"] == "markdown" else _outputs(cell)
        for text in shown:
            for what, pattern in NOT_PLAIN.items():
                found = pattern.search(text)
                assert not found, f"{stem} cell {i}: {what} ({found.group()!r}) in {text[:120]!r}"


def test_grad_piles_up_within_the_first_third_of_beginner_1():
    cells = _cells("beginner_1_carrying_bricks")
    six = next(i for i, c in enumerate(cells) if any(line.strip() == "tensor(6.)" for s in _outputs(c)
                                                     for line in s.splitlines()))  # held under its guess: a line
    words = [readability.words(_text(c["source"])) if c["cell_type"] == "markdown" else 0 for c in cells]
    assert sum(words[:six]) <= sum(words) / 3, (sum(words[:six]), sum(words))


# --- the first screens ---------------------------------------------------------------------------------

def test_the_first_developer_notebook_opens_with_the_loop_its_gpu_recipe_the_auditor_and_the_mistakes():
    code = [c for c in _cells("developer_1_proving_equivalence") if c["cell_type"] == "code" and not _install(c)]
    setup, loop, recipe, audit, table = code[:5]
    assert not setup.get("outputs") and all(line.startswith(("import ", "from ")) for line in
                                            _text(setup["source"]).splitlines() if line)
    assert _text(loop["source"]).startswith("import itertools\n\nimport torch\n\n\ndef train(")
    assert len(inspect.getsource(loops.train).splitlines()) <= 20
    assert "\n\n\ndef train_amp(" in _text(recipe["source"])
    assert "audit_training_loop(loop" in _text(audit["source"])
    assert {s.split(" matches")[0] for s in _outputs(audit)} >= {"✓ train", "✓ train_amp"}
    assert any("| mistake | what you see | the fix |" in s for s in _outputs(table))


def test_start_here_opens_with_something_to_touch_then_start_then_the_map():
    cells = _cells("00_start_here")
    first_code = next(i for i, c in enumerate(cells) if c["cell_type"] == "code" and not _install(c))
    assert "make_bricks_widget" in _text(cells[first_code]["source"])
    after = _text(cells[first_code + 1]["source"])
    assert "[Start →](beginner_1_carrying_bricks.ipynb)" in after and "developer_1_proving_equivalence.ipynb" in after
    tier_map = _text(cells[first_code + 2]["source"])
    assert tier_map.startswith("## The map") and tier_map.count("](") >= 15  # every notebook named is a link
    later = "".join(_text(c["source"]) for c in cells[first_code + 3:])
    assert "catalog_table()" in later and "AccumulationConfig(accumulation_steps=0)" in later
    assert "widgets.doctor()" in later


# --- output a person reads ---------------------------------------------------------------------------

@pytest.mark.parametrize("stem", OWNED)
def test_printed_lines_fit_the_page(stem):
    """JupyterLab breaks a long printed line anywhere, mid-word; at 1366 px about 100 characters fit."""
    for i, cell in enumerate(_cells(stem)):
        for output in cell.get("outputs", []):
            if output.get("output_type") != "stream":
                continue
            long = [line for line in _text(output.get("text")).splitlines() if len(line) > 100]
            assert not long, f"{stem} cell {i} prints {len(long[0])} characters on one line: {long[0][:60]!r}"


@pytest.mark.parametrize("stem", sorted(p.stem for p in NOTEBOOKS.glob("*.ipynb")))
def test_code_lines_fit_the_page(stem):
    """A code line longer than about 100 characters scrolls sideways at 1366 px, the install cell's too."""
    for i, cell in enumerate(_cells(stem)):
        if cell["cell_type"] == "code":
            long = [line for line in _text(cell["source"]).splitlines() if len(line) > 100]
            assert not long, f"{stem} cell {i} has a code line of {len(long[0])} characters: {long[0][:60]!r}"


# --- exercises say what they ask ---------------------------------------------------------------------

def _sets():
    from widgets.lessons.beginner_1 import beginner_exercises
    from widgets.lessons.developer_1 import proof_exercises
    from widgets.lessons.developer_2 import loop_exercises
    from widgets.lessons.developer_3 import gallery_exercises
    return {"beginner_1_carrying_bricks": beginner_exercises(), "developer_1_proving_equivalence": proof_exercises(),
            "developer_2_training_loop": loop_exercises(), "developer_3_bug_gallery": gallery_exercises()}


def test_every_checked_exercise_says_what_it_asks_and_beginners_compute_at_most_twice():
    kinds = {stem: [e.kind for e in exercises] for stem, exercises in _sets().items()}
    assert all(None not in k for k in kinds.values()), kinds
    for stem in BEGINNER:
        asked = kinds.get(stem, [])
        assert asked.count("compute") <= 2, (stem, asked)
    assert kinds["beginner_1_carrying_bricks"].count("predict") >= 2
    counts = {stem: {kind: k.count(kind) for kind in set(k)} for stem, k in kinds.items()}
    print(counts)  # the kinds, counted
