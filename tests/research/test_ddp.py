"""A real two-process gloo run: all-reduces counted, weights allclose to one process, nothing left running."""
import multiprocessing.context
import signal
import socket
import time

import psutil
import pytest

from tests.processes import still_running
from widgets.core.config import BudgetError
from widgets.research.ddp import (
    DDPConfig, DDPError, communication_per_update, make_ddp_mlp, ring_allreduce_bytes, run_ddp, sampler_shards,
    sharded_gradient_bytes,
)


def _workers_alive(before):
    children = psutil.Process().children(recursive=True)
    # the multiprocessing resource tracker may stay for the test session; workers must not
    return [p for p in children if p.pid not in before and "resource_tracker" not in " ".join(p.cmdline())]


@pytest.fixture(scope="module")
def result():
    return run_ddp(DDPConfig(world_size=2, accumulation_steps=4, micro_batch_size=4, num_updates=2), timeout_s=120)


def test_allreduces_per_update(result):
    assert result.per_rank["every_micro_step"][0]["allreduces_per_update"] == [4, 4]
    assert result.per_rank["no_sync"][1]["allreduces_per_update"] == [1, 1]
    grad_bytes = sum(p.numel() * 4 for p in make_ddp_mlp().parameters())
    assert result.per_rank["no_sync"][0]["bytes_per_update"] == [grad_bytes, grad_bytes]
    assert result.per_rank["every_micro_step"][0]["bytes_per_update"] == [4 * grad_bytes] * 2


def test_weights_match_a_single_process_on_w_k_b_examples(result):
    assert result.allclose_to_single_process("every_micro_step")
    assert result.allclose_to_single_process("no_sync")


def test_a_raising_worker_stops_every_worker():
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    with pytest.raises(DDPError, match="worker 1 raised"):
        run_ddp(DDPConfig(num_updates=1), timeout_s=120, fail_on_rank=1)
    assert _workers_alive(before) == []


def test_a_taken_port_gives_a_clear_message():
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        with pytest.raises(DDPError, match="could not start"):
            run_ddp(DDPConfig(num_updates=1), timeout_s=120, port=s.getsockname()[1])
    assert _workers_alive(before) == []


def test_on_paper():
    assert ring_allreduce_bytes(100.0, 1) == 0.0
    assert ring_allreduce_bytes(100.0, 4) == 150.0
    assert communication_per_update(100.0, 4, 8, no_sync=False) == 8 * communication_per_update(100.0, 4, 8, True)
    assert sharded_gradient_bytes(100.0, 4, skip_sync=False) == 25.0
    assert sharded_gradient_bytes(100.0, 4, skip_sync=True) == 100.0


def test_sampler_pads_or_drops_the_tail():
    padded = sampler_shards(10, 4, drop_last=False)
    assert [len(s) for s in padded] == [3, 3, 3, 3] and sorted(sum(padded, [])) == sorted(list(range(10)) + [0, 1])
    dropped = sampler_shards(10, 4, drop_last=True)
    assert [len(s) for s in dropped] == [2, 2, 2, 2] and len(set(sum(dropped, []))) == 8


def test_bad_input():
    with pytest.raises(ValueError, match="world_size"):
        DDPConfig(world_size=0)
    with pytest.raises(ValueError, match="timeout_s"):
        run_ddp(timeout_s=0)
    with pytest.raises(ValueError, match="fail_on_rank"):
        run_ddp(fail_on_rank=5)
    with pytest.raises(ValueError, match="workers"):
        ring_allreduce_bytes(1.0, 0)


# --- limits and processes ---------------------------------------------------------------------

def test_sizes_past_the_ceiling_are_refused_before_any_tensor(monkeypatch):
    monkeypatch.delenv("LAB_MEMORY_LIMIT_MB", raising=False)
    with pytest.raises(BudgetError, match=r"about 3\.9 GB, over this lab's limit of 1\.0 GB per process") as caught:
        DDPConfig(8, 64, 1024, 100)  # 52 million examples in each of 9 processes: about 38 GB in all
    assert "LAB_MEMORY_LIMIT_MB" in str(caught.value)
    monkeypatch.setenv("LAB_MEMORY_LIMIT_MB", "0.001")
    with pytest.raises(BudgetError, match="limit of 0 MB"):
        DDPConfig()
    monkeypatch.setenv("LAB_MEMORY_LIMIT_MB", "lots")
    with pytest.raises(ValueError, match="LAB_MEMORY_LIMIT_MB must be a positive number"):
        DDPConfig()


def test_a_run_past_the_time_ceiling_is_refused_before_any_process(monkeypatch):
    monkeypatch.setenv("LAB_TIME_LIMIT_S", "5")
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    with pytest.raises(BudgetError, match=r"would run about \d+ s, over this lab's limit of 5 s"):
        run_ddp(DDPConfig(num_updates=1))
    assert [p for p in psutil.Process().children(recursive=True) if p.pid not in before] == []


def test_a_worker_that_cannot_start_is_reported_and_the_started_ones_stopped(monkeypatch):
    """Before: the finally's join hid the start failure behind 'can only join a started process'."""
    original, calls = multiprocessing.context.SpawnProcess.start, []

    def start_once(process):
        calls.append(process)
        if len(calls) == 2:
            raise OSError(11, "Resource temporarily unavailable")
        return original(process)

    monkeypatch.setattr(multiprocessing.context.SpawnProcess, "start", start_once)
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    with pytest.raises(DDPError, match="worker 1 could not be started .*Resource temporarily unavailable.*1 started"):
        run_ddp(DDPConfig(num_updates=1), timeout_s=120)
    assert _workers_alive(before) == []


KERNEL = """
from widgets.research.ddp import DDPConfig, run_ddp
run_ddp(DDPConfig(accumulation_steps=64, micro_batch_size=64, num_updates=100), timeout_s=600)
"""


def test_workers_exit_within_3_s_when_the_kernel_is_killed(kernel_with_workers):
    """A kernel killed for memory (SIGKILL: no finally runs) must not leave its workers training."""
    kernel, workers = kernel_with_workers(KERNEL, joined=True)  # past start-up (seconds on a busy machine)
    time.sleep(1)
    assert all(w.is_running() for w in workers), "the run ended before the kernel was killed: make it longer"
    kernel.send_signal(signal.SIGKILL)
    kernel.wait()
    alive = still_running(workers, timeout_s=3)
    assert alive == [], f"{len(alive)} DDP worker(s) still running 3 s after their kernel died"
