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
    "tests/research/test_rendezvous.py::test_during_a_run_nothing_is_reachable",  # a gloo run, its ports probed
    "tests/research/test_rendezvous.py::test_the_folder_is_deleted_when_its_kernel_is_killed",  # a kernel killed
    "tests/lessons/beginner_2/test_controls_lifecycle.py::test_re_running_the_cell_30_times",  # 30 explorers built
    "tests/test_reliability.py::test_100_slider_changes",  # 100 redraws and a memory reading
    "tests/lab/test_instructor.py::",  # runs make_plans twice
    "tests/lessons/researcher_6/test_across_ranks.py::test_per_rank_mean_fails",  # these three: gloo runs
    "tests/lessons/researcher_6/test_across_ranks.py::test_nothing_is_left_after_a_run",
    "tests/lessons/researcher_6/test_across_ranks.py::test_an_error_in_a_worker_stops_every_worker",
    "tests/test_windows.py::",  # every module imported again in a subprocess
    "tests/core/test_sizes_checked.py::test_every_builder_is_listed",  # a subprocess lists the builders
    "tests/lessons/developer_4/test_frameworks.py::test_importing_the_adapters",  # a subprocess imports Lightning
    # each waits out a time limit; make check keeps one hanging loop of each kind (test_each_hanging_loop_returns...)
    "tests/audit/test_field_loops.py::test_a_hanging_loop_is_stopped_at_the_time_limit",
    "tests/audit/test_field_loops.py::test_a_rank_asleep_past_the_limit",
    "tests/lab/test_progress.py::test_writers_killed_mid_write",  # processes killed mid-write
)


# Tests that state a claim about float rounding (a bound, an ulp count, which side of 1 a factor lands):
# marked `rounding`, which `make test` runs a second time with ATen and MKL held to other code paths.
ROUNDING = (
    "tests/lessons/researcher_1/test_precision.py::",
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


@pytest.fixture(autouse=True, scope="session")
def _one_torch_thread():
    """The lab's models are tiny: one thread runs them faster, and the test processes share the cores."""
    from widgets.core.training import one_thread

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


@pytest.fixture
def before_allocating(monkeypatch):
    """The default ceilings, and `with before_allocating():` a block in which torch's tensor and
    layer factories fail: a BudgetError raised inside it came before the request's first tensor."""
    from contextlib import contextmanager

    import torch

    from widgets.core.config import MEMORY_ENV, TIME_ENV

    monkeypatch.delenv(MEMORY_ENV, raising=False)
    monkeypatch.delenv(TIME_ENV, raising=False)

    def allocated(*args, **kwargs):
        raise AssertionError("a tensor or layer was made before the budget check")

    @contextmanager
    def forbid():
        with pytest.MonkeyPatch.context() as patch:
            for name in ("randn", "rand", "randint", "linspace"):  # (a check may make a 1-element tensor)
                patch.setattr(torch, name, allocated)
            for name in ("Linear", "Embedding", "GRU", "BatchNorm1d", "LayerNorm", "GroupNorm"):
                patch.setattr(torch.nn, name, allocated)
            yield

    return forbid


@pytest.fixture
def kernel_with_workers():
    """`start(code, joined=False)`: run `code` in a stand-in kernel (python -c) and wait until it has
    spawned two gloo workers (with joined=True, until both hold a TCP connection: they are in the
    group, past start-up). Returns (the kernel's Popen, the workers as psutil processes). Whatever is
    still running at the end of the test is killed."""
    import subprocess
    import sys
    import time

    import psutil

    started = []

    def spawned(parent):
        try:
            children = parent.children()
        except psutil.NoSuchProcess:
            return []
        return [p for p in children if "multiprocessing.spawn" in " ".join(p.cmdline())
                and "resource_tracker" not in " ".join(p.cmdline())]

    def in_group(worker):
        try:
            return any(c.status == psutil.CONN_ESTABLISHED for c in worker.net_connections(kind="tcp"))
        except psutil.NoSuchProcess:
            return False

    def start(code: str, joined: bool = False, timeout_s: float = 120):
        kernel = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        entry = [kernel, []]
        started.append(entry)
        parent, deadline = psutil.Process(kernel.pid), time.monotonic() + timeout_s
        while len(entry[1]) < 2:
            assert kernel.poll() is None and time.monotonic() < deadline, "the workers never started"
            time.sleep(0.1)
            entry[1] = spawned(parent)
        while joined and not all(in_group(w) for w in entry[1]):
            assert kernel.poll() is None and time.monotonic() < deadline, "the workers never joined the group"
            time.sleep(0.2)
        return kernel, entry[1]

    yield start
    for kernel, workers in started:
        if kernel.poll() is None:
            kernel.kill()
            kernel.wait()
        for w in workers:
            try:
                w.kill()
            except psutil.NoSuchProcess:
                pass
