"""Shared pytest set-up: what nbval must not collect, and the browser latencies in the summary."""
import json
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# The progress file and Jupyter's, IPython's and matplotlib's folders are redirected for every test
# run, notebooks included, by the conftest.py at the repository root.

# The browser test's fixture notebook is run in JupyterLab by test_browser.py, not by nbval
# (it is stored without outputs, so nbval would have nothing to compare).
collect_ignore_glob = ["browser/*.ipynb"]

# Tests that start processes or run a notebook, seconds each: marked `slow`, which `make check`
# leaves out (`make test` runs them). A module may mark its own with @pytest.mark.slow instead.
SLOW = (
    "tests/test_offline.py::test_the_explorer_notebook_runs_without_a_network",  # a notebook, no network
    "tests/research/test_ddp.py::test_allreduces_per_update",  # these six: two-process gloo runs
    "tests/research/test_ddp.py::test_weights_match_a_single_process",
    "tests/research/test_ddp.py::test_a_raising_worker_stops_every_worker",
    "tests/research/test_ddp.py::test_a_taken_port_gives_a_clear_message",
    "tests/research/test_ddp.py::test_workers_exit_within_3_s_when_the_kernel_is_killed",
    "tests/research/test_ddp.py::test_a_worker_that_cannot_start",
    "tests/controls/test_explorer_lifecycle.py::test_re_running_the_cell_30_times",  # 30 explorers built
    "tests/test_reliability.py::test_100_slider_changes",  # 100 redraws and a memory reading
    "tests/lab/test_instructor.py::",  # runs make_plans twice
    "tests/lab/test_doctor.py::test_a_kernel_from_another_environment",  # a new venv, a doctor subprocess
    "tests/lab/test_doctor.py::test_an_ipywidgets_of_the_wrong_generation",
)


# Tests that state a claim about float rounding (a bound, an ulp count, which side of 1 a factor lands):
# marked `rounding`, which `make test` runs a second time with ATen and MKL held to other code paths.
ROUNDING = (
    "tests/research/test_precision.py::",
    "tests/core/test_exactness.py::",
    "tests/core/test_accumulation.py::",
    "tests/research/test_tokens.py::",
    "tests/audit/test_problems.py::test_a_factor_a_hair_off_a_simple_value",
)


def pytest_collection_modifyitems(items):
    for item in items:
        if item.nodeid.startswith(SLOW):
            item.add_marker(pytest.mark.slow)
        if item.nodeid.startswith(ROUNDING):
            item.add_marker(pytest.mark.rounding)


_started = time.time()


@pytest.fixture(scope="module")
def single_thread():
    """For modules whose models are tiny: one CPU thread runs them faster (far faster on a busy CPU)."""
    from widgets.core.threads import one_thread

    with one_thread():
        yield


def pytest_terminal_summary(terminalreporter):
    """Print the latencies the browser test measured in this run, next to the pass/fail counts."""
    path = ROOT / "test-artifacts" / "browser_latency.json"
    if not path.exists() or path.stat().st_mtime < _started:
        return
    result = json.loads(path.read_text())
    terminalreporter.write_sep("-", "browser latency (test-artifacts/browser_latency.json)")
    terminalreporter.write_line(
        f"key press -> figure changed, median of {result['presses']} presses: "
        f"explorer {result['explorer_ms']['median']} ms, bare one-slider {result['bare_one_slider_ms']['median']} ms "
        f"(explorer / bare = {result['explorer_over_bare']})"
    )
