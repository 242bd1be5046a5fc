"""`make compat`'s comparison: its masks hide what versions move (numbers, torch's build label, how
ipywidgets 7 and 8 spell a repr) and never a verdict (True, False, a mistake's name); its warnings policy
sets Python's and torch's warnings aside and compares anything else on stderr; its results file says
per notebook what happened. The run itself (GBs of downloads) is `make compat`, never part of `make test`."""
from __future__ import annotations

import importlib.util
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from widgets.core.mistakes import EVERY_MISTAKE

ROOT = Path(__file__).resolve().parents[1]
SANITIZE = ROOT / "benchmarks" / "compat_sanitize.cfg"
SPEC = importlib.util.spec_from_file_location("compat_nbval", ROOT / "benchmarks" / "compat_nbval.py")
policy = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(policy)
MASKS = policy.named_masks(str(SANITIZE))


def masked(text: str) -> str:
    for _, regex, replace in MASKS:
        text = re.sub(regex, replace, text)
    return text


def test_nbval_reads_the_same_masks_in_the_same_order():
    from nbval.plugin import get_sanitize_patterns

    assert get_sanitize_patterns(SANITIZE.read_text()) == [(regex, replace) for _, regex, replace in MASKS]
    assert [name for name, _, _ in MASKS] == ["inline png", "memory address", "number", "torch build label",
                                              "widget attribute of one generation", "column padding"]


def verdicts(text: str) -> dict[str, int]:
    tokens = ["True", "False", *dict.fromkeys(EVERY_MISTAKE)]
    return {token: len(re.findall(rf"\b{re.escape(token)}\b", text)) for token in tokens}


def committed_texts() -> list[str]:
    texts = []
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        for cell in nbformat.read(path, as_version=4).cells:
            for output in cell.get("outputs", []):
                texts += [output.get("text", "")] + [v for v in output.get("data", {}).values() if isinstance(v, str)]
    return [t for t in texts if t]


def test_no_mask_hides_a_verdict_in_any_committed_output():
    texts = committed_texts()
    before = verdicts("\n".join(texts))
    assert before["True"] and before["False"] and before["loss_not_divided"]  # the notebooks do print them
    assert verdicts("\n".join(masked(t) for t in texts)) == before


@pytest.mark.parametrize("committed, now", [
    ("max |accumulated - big-batch| = 6.86e+00 -> allclose: False", "max |accumulated - big-batch| = 7.1e+00 -> allclose: False"),
    ("torch              2.13.0+cpu", "torch              2.11.0"),
    ("torch 2.13.0+cu128", "torch 2.14.1"),
    ("  0%|          | 0/5 [00:00<?, ?it/s]", "  0%|          | 0/5 [00:01<?, ?it/s]"),
    ("<Figure at 0x7f3a2c1d9e50>", "<Figure at 0x55d1e2f3a4b0>"),
    ("IntSlider(value=4, description='K', max=16, min=1, tooltip='accumulation_steps')",  # ipywidgets 8
     "IntSlider(value=4, description='K', description_tooltip='accumulation_steps', max=16, min=1)"),  # 7
    ("Checkbox(value=True, description='bug', layout=Layout(width='120px'), tabbable=True)",
     "Checkbox(value=True, description='bug', layout=Layout(width='120px', grid_area='a'))"),
    ("| K | loss  |\n|---|-------|\n| 4 | 0.125 |", "| K | loss |\n|---|-------|\n| 4 | 0.1249 |"),
])
def test_what_versions_move_is_masked(committed, now):
    assert masked(committed) == masked(now)


@pytest.mark.parametrize("committed, now", [
    ("gradients allclose: True", "gradients allclose: False"),
    ("mistakes found: loss_not_divided", "mistakes found: loss_divided_twice"),
    ("Checkbox(value=True, description='bug')", "Checkbox(value=False, description='bug')"),
    ("the pile is -22.5", "the pile is 22.5"),
    ("torch 2.13.0", "jax 2.13.0"),
])
def test_what_a_notebook_says_is_never_masked(committed, now):
    assert masked(committed) != masked(now)


def test_warnings_are_set_aside_and_anything_else_on_stderr_is_kept():
    stderr = ("/usr/lib/python3/site-packages/ipywidgets/widgets/widget.py:503: DeprecationWarning: "
              "the tooltip trait is deprecated\n  warnings.warn(\n"
              "[W1203 10:11:12.000000000 ProcessGroupGloo.cpp:727] Warning: unused parameter\n"
              "RuntimeError: the worker died\n")
    kept, warnings = policy.split_warnings(stderr)
    assert kept == "RuntimeError: the worker died\n"
    assert len(warnings) == 2 and warnings[0].endswith("DeprecationWarning: the tooltip trait is deprecated\n"
                                                       "  warnings.warn(")
    assert warnings[1].endswith("] Warning: unused parameter")
    outputs = [{"output_type": "stream", "name": "stderr", "text": stderr.split("RuntimeError")[0]},
               {"output_type": "stream", "name": "stdout", "text": "True\n"}]
    assert policy.without_warnings(outputs)[0] == [outputs[1]]  # a stderr of warnings only is dropped


def test_make_compat_runs_the_script_and_is_no_part_of_make_test():
    makefile = (ROOT / "Makefile").read_text()
    recipe = re.search(r"^compat:.*\n\t(.+)$", makefile, re.M)[1]
    assert recipe.startswith("$(PYTHON) benchmarks/compat.py")
    for target in ("test", "check"):
        body = re.search(rf"^{target}:.*?(?=^\S)", makefile, re.M | re.S)[0]
        assert "compat" not in body


def test_the_results_say_per_notebook_what_happened():
    path = ROOT / "benchmarks" / "results" / "compat.json"
    if not path.exists():
        pytest.skip("no benchmarks/results/compat.json yet: run `make compat`")
    results = json.loads(path.read_text())
    assert set(results["profiles"]) <= {"colab", "newest"}
    notebooks = {p.relative_to(ROOT).as_posix() for p in (ROOT / "notebooks").glob("*.ipynb")}
    for name, profile in results["profiles"].items():
        assert profile["versions"]["torch"].startswith({"colab": "2.11.0", "newest": "2.14.1"}[name])
        assert set(profile["notebooks"]) <= notebooks
        assert profile["complete"] == (set(profile["notebooks"]) == notebooks)
        for entry in profile["notebooks"].values():
            assert entry["result"] in ("passed", "failed", "error") and entry["seconds"] > 0
            assert (entry["result"] == "passed") == (not entry["failed_cells"] and entry["result"] != "error")


@pytest.mark.slow
def test_nbval_under_the_policy_passes_what_moved_and_fails_what_changed(tmp_path):
    """A notebook committed with other numbers and no warning passes; one whose verdict changed fails."""
    def notebook(cells: list[tuple[str, list]]) -> nbformat.NotebookNode:
        nb = nbformat.v4.new_notebook()
        for i, (source, outputs) in enumerate(cells, 1):
            nb.cells.append(nbformat.v4.new_code_cell(source, execution_count=i, outputs=outputs))
        return nb

    def printed(text):
        return [nbformat.v4.new_output("stream", name="stdout", text=text)]

    moved = notebook([
        ("print(round(2 / 3, 4), 'allclose:', True)", printed("0.667 allclose: True\n")),  # committed: 3 digits
        ("import warnings; warnings.warn('a newer version says so', DeprecationWarning, stacklevel=1); print(1)",
         printed("1\n")),
    ])
    changed = notebook([("print(round(2 / 3, 4), 'allclose:', False)", printed("0.6667 allclose: True\n"))])
    nbformat.write(moved, tmp_path / "moved.ipynb")
    nbformat.write(changed, tmp_path / "changed.ipynb")
    shutil.copy2(ROOT / "benchmarks" / "compat_nbval.py", tmp_path)
    record = tmp_path / "cells.jsonl"
    results = {}
    for name in ("moved", "changed"):
        done = subprocess.run([sys.executable, "-m", "pytest", f"{name}.ipynb", "-q", "-p", "no:cacheprovider",
                               "-p", "compat_nbval", "--nbval", "--nbval-current-env", f"--nbval-sanitize-with={SANITIZE}",
                               "-c", "/dev/null", "--rootdir", str(tmp_path)], cwd=tmp_path, capture_output=True,
                              text=True, env={**__import__("os").environ, "COMPAT_RECORD": str(record)}, timeout=300)
        results[name] = done.returncode
    assert results == {"moved": 0, "changed": 1}
    cells = [json.loads(line) for line in record.read_text().splitlines()]
    assert cells[0]["exact"] is False and cells[0]["masks"] == ["number"]
    assert cells[1]["warnings"][0].splitlines()[0].endswith("DeprecationWarning: a newer version says so")
    assert cells[2]["matched"] is False
