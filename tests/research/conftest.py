"""The researcher-tier models are tiny: one CPU thread runs them faster than two (and far faster on a busy machine)."""
import pytest

from widgets.core.threads import one_thread


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    with one_thread():
        yield


@pytest.fixture
def before_allocating(monkeypatch):
    """The default ceilings, and `with before_allocating():` a block in which torch's tensor and
    layer factories fail: a BudgetError raised inside it came before the request's first tensor."""
    from contextlib import contextmanager

    import torch

    from widgets.core.budget import MEMORY_ENV, TIME_ENV

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
