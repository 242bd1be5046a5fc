"""Shared pytest set-up: what nbval must not collect, and the browser latencies in the summary."""
import json
import os
import tempfile
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# Checked exercises record the learner's progress in a file under the home folder; a test run
# (and every kernel nbval starts, which inherits this environment) writes to a throw-away one.
os.environ.setdefault("LAB_PROGRESS_FILE", str(Path(tempfile.mkdtemp(prefix="lab-progress-")) / "progress.json"))

# The browser test's fixture notebook is run in JupyterLab by test_browser.py, not by nbval
# (it is stored without outputs, so nbval would have nothing to compare).
collect_ignore_glob = ["browser/*.ipynb"]


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
