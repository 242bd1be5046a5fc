"""benchmarks/readability.py: the committed table is current, and the targets of issue 25 hold.

The measurement reads the executed notebooks only (nothing runs), so it is cheap enough to repeat
here: the committed `benchmarks/results/readability.json` must equal a fresh measurement (after a
notebook's text changes, run `python benchmarks/readability.py`), the README must quote it, and
each targeted notebook must meet its targets, so a regression fails here.
"""
from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("benchmark_readability", ROOT / "benchmarks" / "readability.py")
readability = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = readability
_spec.loader.exec_module(readability)

FRESH = readability.measure_all()


def test_the_committed_table_is_current():
    committed = json.loads(readability.RESULT.read_text())["notebooks"]
    stale = {stem: (committed.get(stem), metrics) for stem, metrics in FRESH.items() if committed.get(stem) != metrics}
    assert not stale, f"run `python benchmarks/readability.py`: these notebooks changed since: {sorted(stale)}"
    assert set(committed) == set(FRESH)


def test_the_readme_quotes_the_table():
    assert readability.table(FRESH, list(readability.TARGETS)) in (ROOT / "README.md").read_text(), \
        "README.md's readability table differs from `python benchmarks/readability.py --table`"


@pytest.mark.parametrize("stem", list(readability.TARGETS))
def test_targets_hold(stem):
    assert not readability.misses(stem, FRESH[stem]), readability.misses(stem, FRESH[stem])


def test_every_notebook_ends_with_a_link_to_the_next():
    assert [stem for stem, m in FRESH.items() if not m["ends_with_link_to_next"]] == []


# --- the measurement itself, on made-up cells ------------------------------------------------------

def test_prose_leaves_out_code_maths_tags_and_link_targets():
    text = ("# Title\nOne `code span` and $x_1 + 2$ and $$\\sum_i$$ and <b>bold</b> "
            "[a link](https://example.org/page_2.html).\n```python\nprint(12345)\n```\nEnd.")
    assert readability.words(text) == 9  # Title One and and and bold a link End
    assert readability.numbers(text) == 0  # the 2 in maths, 12345 in code, page_2 in a link target
    assert readability.links(text) == ["https://example.org/page_2.html"]


def test_numbers_are_counted_as_the_claims_test_finds_them():
    text = "About 4× faster: 2.5% of 1,024 examples, twice 3 and 3 (Goyal et al., 2017), in float32.\n2. a list"
    assert readability.numbers(text) == 5  # 4, 2.5%, 1,024, 3, 3: not the year, the name, the list number


def _notebook(tmp_path, name, cells):
    path = tmp_path / f"{name}.ipynb"
    path.write_text(json.dumps({"cells": cells}))
    return path


def _md(text):
    return {"cell_type": "markdown", "source": text}


def _code(source, *outputs):
    return {"cell_type": "code", "source": source, "outputs": list(outputs)}


def test_a_notebook_is_measured(tmp_path):
    widget = {"output_type": "display_data", "data": {"application/vnd.jupyter.widget-view+json": {},
                                                        "text/plain": "Widget"}}
    stream = {"output_type": "stream", "name": "stdout", "text": "a\nb\nc\n"}
    table = {"output_type": "execute_result", "data": {"text/markdown": "| a |\n|---|\n| 1 |", "text/plain": "x\ny"}}
    path = _notebook(tmp_path, "b_first", [
        _md("Two words."), _code("print(1)", stream), _md("Three more words."), _code("w", widget, table),
        _code("x = '" + "y" * 100 + "'"), _md("Onward: [the next one](c_last.ipynb)."),
    ])
    measured = readability.measure(path, ["a", "b_first", "c_last"])
    assert measured == {
        "prose_words": 9, "numbers_per_100_words": 0.0, "words_before_first_visual": 5,
        "longest_plain_output": 3, "long_code_lines": 1, "markdown_links": 1, "ends_with_link_to_next": True,
    }
    assert readability.measure(path, ["b_first", "a", "c_last"])["ends_with_link_to_next"] is False
    assert readability.measure(_notebook(tmp_path, "c_last", [_md("[back](a.ipynb)")]),
                               ["a", "b_first", "c_last"])["ends_with_link_to_next"] is True


def test_misses_names_the_metric_and_its_target():
    metrics = dict(FRESH["00_start_here"], words_before_first_visual=151, ends_with_link_to_next=False)
    missed = readability.misses("00_start_here", metrics)
    assert "words_before_first_visual = 151 (target: <= 150)" in missed
    assert "ends_with_link_to_next = False (target: True)" in missed
