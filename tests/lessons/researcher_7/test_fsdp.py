"""FSDP2 on two gloo processes: the gradient allclose to one process, collectives counted, the unsharded
pile measured while the sync is off, and no worker left running after a run or a worker's error."""
import inspect
import json
import signal
import time
from pathlib import Path

import psutil
import pytest

from tests.processes import still_running
from widgets.core.config import BudgetError
from widgets.research.ddp import DDPError
from widgets.lessons.researcher_7.fsdp import (
    MODES, FSDPConfig, _fsdp_job, make_fsdp_mlp, process_bytes, run_fsdp, sharded_update,
)

slow = pytest.mark.slow  # each run starts two processes that import torch's FSDP (10-30 s on a busy machine)
NOTEBOOK = Path(__file__).resolve().parents[3] / "notebooks" / "researcher_7_shards_and_stages.ipynb"

CONFIG = FSDPConfig(world_size=2, accumulation_steps=3, micro_batch_size=4, hidden=512)


def _workers_alive(before):
    children = psutil.Process().children(recursive=True)
    # the multiprocessing resource tracker may stay for the test session; workers must not
    return [p for p in children if p.pid not in before and "resource_tracker" not in " ".join(p.cmdline())]


@pytest.fixture(scope="module")
def run():
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    result = run_fsdp(CONFIG, timeout_s=180)
    return result, _workers_alive(before)


@slow
def test_gradient_allclose_to_one_process_with_and_without_sync(run):
    result, _ = run
    for mode, how in MODES.items():
        if how["bf16"]:  # bfloat16 arithmetic: near one process, not allclose in float32
            assert 1e-4 < result.relative_error(mode) < 1e-2, mode
        else:
            assert result.allclose_to_single_process(mode), mode


@slow
def test_gradient_check_can_fail(run):
    """The oracle is not vacuous: a rank's gradient scaled by K (the missing division) is not allclose."""
    import torch

    from widgets.core.accumulation import GRAD_ATOL, GRAD_RTOL
    result, _ = run
    scaled = result.gradient("no_sync", 0) * CONFIG.accumulation_steps
    assert not torch.allclose(scaled, result.reference_gradient, rtol=GRAD_RTOL, atol=GRAD_ATOL)


@slow
def test_collectives_per_update(run):
    result, _ = run
    layers, K = 3, CONFIG.accumulation_steps
    for rank in range(CONFIG.world_size):
        synced, skipped = result.per_rank["sync_every_micro_step"][rank], result.per_rank["no_sync"][rank]
        assert synced["reduce_scatters"] == layers * K  # one per FSDP unit per micro-step
        assert skipped["reduce_scatters"] == layers  # only the last micro-step
        assert synced["all_gathers"] == skipped["all_gathers"] == 2 * layers * K  # forward and backward, always
        after_backward = result.per_rank["no_sync, kept after backward"][rank]
        throughout = result.per_rank["no_sync, kept throughout"][rank]
        assert after_backward["all_gathers"] == layers * (K + 1)  # the forward still frees, backward gathers again
        assert throughout["all_gathers"] == layers  # gathered once for the whole update
        assert after_backward["reduce_scatters"] == throughout["reduce_scatters"] == layers


def held_between_micro_steps(result, mode: str) -> int:
    """Most bytes any rank held after a micro-step before the last."""
    return max(b for r in result.per_rank[mode] for b in r["held_bytes"][:-1] if b is not None)


@slow
def test_unsharded_pile_measured_while_the_sync_is_off(run):
    result, _ = run
    if process_bytes() is None:
        pytest.skip("no glibc mallinfo2 here: the bytes are not measured")
    full = result.gradient_bytes
    assert full == sum(p.numel() for p in make_fsdp_mlp(CONFIG.hidden).parameters()) * 4
    for rank in range(CONFIG.world_size):
        synced = result.per_rank["sync_every_micro_step"][rank]["held_bytes"]
        skipped = result.per_rank["no_sync"][rank]["held_bytes"]
        assert all(0.4 * full < b < 0.7 * full for b in synced), synced  # the 1/W shard (+ a little)
        assert all(0.9 * full < b < 1.2 * full for b in skipped[:-1]), skipped  # the whole gradient
        assert 0.4 * full < skipped[-1] < 0.7 * full  # reduce-scattered back to a shard at the last micro-step
        assert result.per_rank["no_sync"][rank]["sharded_grad_bytes"] == full // 2
    # weights kept gathered: the whole weights (as many bytes as the gradient) on top of the whole gradient
    assert 1.8 * full < held_between_micro_steps(result, "no_sync, kept throughout") < 2.3 * full
    # bf16 compute, fp32 reduce_dtype: the unsharded pile is float32, the whole fp32 gradient, not half of it
    assert 0.9 * full < held_between_micro_steps(result, "no_sync, bf16 compute") < 1.2 * full


@slow
def test_no_worker_left_after_a_run(run):
    _, alive = run
    assert alive == []


@slow
def test_a_raising_worker_stops_every_worker():
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    with pytest.raises(DDPError, match="FSDP worker 1 raised"):
        run_fsdp(CONFIG, timeout_s=120, fail_on_rank=1)
    assert _workers_alive(before) == []


def test_bad_input():
    with pytest.raises(ValueError, match="world_size must be a whole number from 1 to 4"):
        FSDPConfig(world_size=5)
    with pytest.raises(ValueError, match="hidden"):
        FSDPConfig(hidden=1)
    with pytest.raises(TypeError, match="config must be an FSDPConfig"):
        run_fsdp({"world_size": 2})
    with pytest.raises(ValueError, match="fail_on_rank must be a whole number from 0 to 1"):
        run_fsdp(CONFIG, fail_on_rank=2)
    with pytest.raises(ValueError, match="timeout_s"):
        run_fsdp(CONFIG, timeout_s=-1)


def test_a_run_past_the_time_ceiling_is_refused_before_any_process(monkeypatch):
    from widgets.core.config import TIME_ENV
    monkeypatch.setenv(TIME_ENV, "1")
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    with pytest.raises(BudgetError):
        run_fsdp(CONFIG)
    assert _workers_alive(before) == []


KERNEL = """
from widgets.lessons.researcher_7.fsdp import FSDPConfig, run_fsdp
run_fsdp(FSDPConfig(accumulation_steps=64, hidden=2048), timeout_s=600)
"""


@slow
def test_workers_exit_within_3_s_when_the_kernel_is_killed(kernel_with_workers):
    """A kernel killed for memory (SIGKILL: no finally runs) must not leave its workers running."""
    kernel, workers = kernel_with_workers(KERNEL, joined=True)  # past start-up: the watchdog runs from here on
    time.sleep(1)
    assert all(w.is_running() for w in workers), "the run ended before the kernel was killed: make it longer"
    kernel.send_signal(signal.SIGKILL)
    kernel.wait()
    alive = still_running(workers, timeout_s=3)
    assert alive == [], f"{len(alive)} FSDP worker(s) still running 3 s after their kernel died"


def test_the_notebook_shows_the_update_the_workers_run():
    source = inspect.getsource(sharded_update).rstrip("\n")
    cells = ["".join(c["source"]) for c in json.loads(NOTEBOOK.read_text())["cells"] if c["cell_type"] == "code"]
    assert sum(source in cell for cell in cells) == 1
    assert "sharded_update(" in inspect.getsource(_fsdp_job)


def test_the_malloc_setting_reaches_only_the_workers():
    """FSDP's fixed mmap threshold is in the environment while the workers start, and gone after,
    also when the start fails."""
    import os
    from unittest import mock

    from widgets.lessons.researcher_7.fsdp import WORKER_ENV
    before = os.environ.get("MALLOC_MMAP_THRESHOLD_")
    with mock.patch.dict(os.environ, WORKER_ENV):
        assert os.environ["MALLOC_MMAP_THRESHOLD_"] == "65536"
    assert os.environ.get("MALLOC_MMAP_THRESHOLD_") == before
    with pytest.raises(RuntimeError), mock.patch.dict(os.environ, WORKER_ENV):
        raise RuntimeError("a worker could not start")
    assert os.environ.get("MALLOC_MMAP_THRESHOLD_") == before
