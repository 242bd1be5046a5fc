"""The map of the lab: complete, in order, and honest about run times that were never measured."""
import json
from pathlib import Path

import pytest

from widgets.lessons.start_here.catalog import (
    NOT_MEASURED,
    NOTEBOOKS,
    RESULTS_PATH,
    TIERS,
    catalog_table,
)

ROOT = Path(__file__).resolve().parents[3]

# The notebooks written with this module; the developer tier's are listed before they exist.
OWN_NOTEBOOKS = (
    "notebooks/00_start_here.ipynb",
    "notebooks/beginner_1_carrying_bricks.ipynb",
    "notebooks/beginner_2_watch_a_model_learn.ipynb",
)


def _write(tmp_path, data):
    path = tmp_path / "results.json"
    path.write_text(json.dumps(data) if not isinstance(data, str) else data, encoding="utf-8")
    return path


def test_map_starts_here_and_follows_the_tiers_in_order():
    paths = [e.path for e in NOTEBOOKS]
    assert paths[0] == "notebooks/00_start_here.ipynb"
    assert len(set(paths)) == len(paths)
    order = list(TIERS)
    assert [order.index(e.tier) for e in NOTEBOOKS] == sorted(order.index(e.tier) for e in NOTEBOOKS)
    assert {"notebooks/developer_1_proving_equivalence.ipynb", "notebooks/developer_2_training_loop.ipynb",
            "notebooks/developer_3_bug_gallery.ipynb"} <= set(paths)
    assert all(e.title and e.description and "\n" not in e.description for e in NOTEBOOKS)
    assert all(len(e.description) <= 100 for e in NOTEBOOKS)  # one line of a table, not a paragraph


@pytest.mark.parametrize("path", OWN_NOTEBOOKS)
def test_own_notebooks_are_listed_and_exist(path):
    assert path in [e.path for e in NOTEBOOKS]
    assert (ROOT / path).is_file()


def test_without_a_results_file_nothing_is_measured(tmp_path):
    table = catalog_table(tmp_path / "results.json")
    assert [row[-1] for row in table.rows] == [NOT_MEASURED] * len(NOTEBOOKS)
    assert "| Researcher | [Why it is exact](researcher_1_why_exact.ipynb) |" in table.markdown()
    assert table.note == ""


def test_measured_times_are_read_and_the_rest_stay_unmeasured(tmp_path):
    path = _write(tmp_path, {
        "notebooks": {
            "notebooks/00_start_here.ipynb": {"seconds": 4.26},
            "notebooks/beginner_1_carrying_bricks.ipynb": {"seconds": 12, "peak_rss_mb": 300},
        },
        "explorer": {"median_ms": 40.0},  # other results in the same file are ignored
        "machine": {"cpus": 2},
        "measured_on": "2026-11-29",
        "command": "python benchmarks/benchmark.py",
    })
    table = catalog_table(path)
    assert [row[-1] for row in table.rows[:2]] == ["4.3 s", "12.0 s"]
    assert [row[-1] for row in table.rows].count(NOT_MEASURED) == len(NOTEBOOKS) - 2
    note = "Run times measured from a fresh kernel on 2026-11-29, with 2 CPUs, by `python benchmarks/benchmark.py`."
    assert table.note == note and table.markdown().endswith(note)


@pytest.mark.parametrize("results", [{"explorer": {}}, {"notebooks": {}, "measured_on": "2026-11-29"},
                                     {"notebooks": {"notebooks/00_start_here.ipynb": {"seconds": 4.0}}}])
def test_without_times_or_where_they_were_measured_the_note_is_empty(tmp_path, results):
    assert catalog_table(_write(tmp_path, results)).note == ""


def test_default_results_file_is_the_benchmarks_one():
    """In a checkout, the benchmark's own file; a lab installed without it reads its wheel's copy
    (tests/test_install.py builds one)."""
    assert RESULTS_PATH == ROOT / "benchmarks" / "results.json"
    assert (ROOT / "pyproject.toml").is_file()
