"""benchmarks/memory.py: the tree's resident pages counted once, against each process's own RSS.

The budget of researcher_5 (kernel plus two DDP workers) is read from the tree's resident pages,
so the reading itself is tested here: for one process it must agree with the kernel's own RSS, and
for processes that share a library it must lie between the largest RSS and the RSS summed.
"""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("benchmark_memory", ROOT / "benchmarks" / "memory.py")
memory = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = memory  # its dataclass looks itself up there
_spec.loader.exec_module(memory)

needs_frames = pytest.mark.skipif(memory.resident_frames(os.getpid()) is None,
                                  reason="page frame numbers are hidden from this user (they need root)")
SLEEPER = "import numpy, sys; sys.stdout.write('ready\\n'); sys.stdout.flush(); sys.stdin.read()"


@pytest.fixture
def sleepers():
    """Two idle interpreters that both import numpy (so they share its library pages); always ended."""
    procs = [subprocess.Popen([sys.executable, "-c", SLEEPER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
             for _ in range(2)]
    try:
        for p in procs:
            assert p.stdout.readline() == "ready\n"
        yield procs
    finally:
        for p in procs:
            p.kill()
            p.wait()


@needs_frames
def test_one_process_resident_pages_match_its_rss():
    ballast = bytearray(64 * 2**20)  # 64 MB touched, so that the figure is not all interpreter
    frames = memory.resident_frames(os.getpid())
    rss = psutil.Process().memory_info().rss
    assert abs(frames.size * memory.PAGE - rss) / rss < 0.1
    del ballast


@needs_frames
def test_shared_pages_count_once_for_the_tree(sleepers):
    pids = [p.pid for p in sleepers]
    rss = [psutil.Process(pid).memory_info().rss for pid in pids]
    tree = memory.tree_resident_bytes(pids)
    assert max(rss) <= tree * 1.05
    assert tree < sum(rss) * 0.95  # the shared libraries (python, numpy) are not counted twice


@needs_frames
def test_tree_memory_polls_children(sleepers):
    with memory.TreeMemory(interval_s=0.01) as tree:
        time.sleep(0.3)
    mb = tree.megabytes()
    assert 0 < mb["peak_resident_mb"] < mb["peak_rss_mb"]
    assert mb["peak_pss_mb"] > 0


def test_a_process_that_ended_is_skipped():
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    assert memory.tree_resident_bytes([int(done.stdout)]) in (0, None)


def test_bad_limit_is_refused_with_its_name():
    notebook = ROOT / "notebooks" / "00_start_here.ipynb"
    run = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "memory.py"), str(notebook), "--limit-mb", "0"],
                         capture_output=True, text=True)
    assert run.returncode == 2
    assert "--limit-mb must be a positive number of MB, got 0" in run.stderr
