"""A real two-process gloo run with unequal token counts: the per-rank mean fails allclose against one
process, both fixes pass, on data-parallel ranks and on the context-parallel ranks of one sequence, and no
worker process is left after a run or a worker's error."""
import signal
import tempfile
import time
from pathlib import Path

import psutil
import pytest
import torch

from tests.processes import still_running
from widgets.core.config import BudgetError
from widgets.lessons.researcher_6.across_ranks import RanksConfig, imbalanced_window, run_across_ranks, token_weights
from widgets.research.ddp import DDPError
from widgets.lessons.researcher_6.invariance import count_targets, split_ranks


def _new_children(before):
    # the multiprocessing resource tracker may stay for the test session; workers must not
    return [p for p in psutil.Process().children(recursive=True)
            if p.pid not in before and "resource_tracker" not in " ".join(p.cmdline())]


def _rendezvous_folders():
    return set(Path(tempfile.gettempdir()).glob("lab-gloo-*"))


@pytest.fixture(scope="module")
def run():
    before, folders = {p.pid for p in psutil.Process().children(recursive=True)}, _rendezvous_folders()
    result = run_across_ranks(RanksConfig(imbalances=(1, 4), context_targets=(1, 24, 32)), timeout_s=180)
    return result, _new_children(before) + sorted(_rendezvous_folders() - folders)


def test_per_rank_mean_fails_with_unequal_counts_and_both_fixes_pass(run):
    result, _ = run
    assert result.counts[1] == [64, 64] and result.counts[4] == [64, 16]
    assert result.against_one_process(1, "per_rank_mean")[0]  # equal counts: the mean of means is the mean
    assert not result.against_one_process(4, "per_rank_mean")[0]
    for x in (1, 4):
        for loop in ("all_reduce_count", "sum_then_scale"):
            assert result.against_one_process(x, loop)[0], (x, loop)
        assert all(result.ranks_agree(x, loop) for loop in ("per_rank_mean", "all_reduce_count", "sum_then_scale"))


def test_a_slice_local_count_halves_the_gradient_at_cp_2_and_the_all_ranks_count_passes(run):
    result, _ = run
    assert result.counts == {1: [64, 64], 4: [64, 16], "cp1": [4, 0], "cp24": [64, 32], "cp32": [64, 64]}
    rank_0 = {case: torch.tensor(result.grads[f"{case}:per_rank_mean"][0], dtype=torch.float64) for case in ("cp1", "cp24")}
    truth = {case: torch.tensor(result.truth[case], dtype=torch.float64) for case in ("cp1", "cp24")}
    assert torch.allclose(rank_0["cp1"], truth["cp1"] / 2, rtol=1e-9, atol=1e-12)  # the second slice is all padding
    assert not result.against_one_process("cp24", "per_rank_mean")[0]  # slices of 64 and 32 targets: turned
    assert result.cosine("cp24", "per_rank_mean") < 0.99
    assert result.against_one_process("cp32", "per_rank_mean")[0]  # equal slices: the mean of means is the mean
    for case in ("cp1", "cp24", "cp32"):
        for loop in ("all_reduce_count", "sum_then_scale"):
            assert result.against_one_process(case, loop)[0], (case, loop)
            assert result.ranks_agree(case, loop)


def test_nothing_is_left_after_a_run(run):
    result, left = run
    assert left == []  # no process, no rendezvous folder


def test_an_error_in_a_worker_stops_every_worker():
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    with pytest.raises(DDPError, match="worker 1 raised"):
        run_across_ranks(RanksConfig(imbalances=(2,)), timeout_s=180, fail_on_rank=1)
    assert _new_children(before) == []


def test_token_weights():
    weights = token_weights([300, 100])
    assert weights["per_rank_mean"] == pytest.approx([1 / 600, 1 / 200])
    assert weights["all_reduce_count"] == pytest.approx([1 / 400, 1 / 400])
    with pytest.raises(ValueError, match=r"rank_counts\[1\]"):
        token_weights([3, 0])


def test_the_windows_have_the_counts_they_say():
    config = RanksConfig(world_size=2, accumulation_steps=2, micro_batch_size=2)
    ranks = split_ranks(imbalanced_window(config, 8), 2, 2)
    assert [sum(count_targets(labels) for _, labels in rank) for rank in ranks] == [64, 8]


def test_bad_input(monkeypatch):
    with pytest.raises(ValueError, match="imbalances"):
        RanksConfig(imbalances=(3,))
    with pytest.raises(ValueError, match="imbalances"):
        RanksConfig(imbalances=())
    with pytest.raises(ValueError, match=r"context_targets\[1\]"):
        RanksConfig(context_targets=(1, 33))
    with pytest.raises(ValueError, match="world_size"):
        RanksConfig(world_size=9)
    with pytest.raises(TypeError, match="config"):
        run_across_ranks("two")
    with pytest.raises(ValueError, match="timeout_s"):
        run_across_ranks(timeout_s=0)
    with pytest.raises(ValueError, match="fail_on_rank"):
        run_across_ranks(fail_on_rank=2)
    monkeypatch.setenv("LAB_TIME_LIMIT_S", "5")
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    with pytest.raises(BudgetError, match="over this lab's limit of 5 s"):
        run_across_ranks()
    assert _new_children(before) == []


KERNEL = """
from widgets.lessons.researcher_6.across_ranks import RanksConfig, run_across_ranks
run_across_ranks(RanksConfig(accumulation_steps=8, micro_batch_size=16), timeout_s=300)
"""


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL], ids=["interrupted", "killed"])
def test_no_worker_is_left_when_the_kernel_is_interrupted_or_killed(sig, kernel_with_workers):
    """Kernel > Interrupt (SIGINT: the finally stops the workers) or a kernel killed for memory
    (SIGKILL: no finally runs; each worker exits when its parent is gone) leaves no worker behind."""
    kernel, workers = kernel_with_workers(KERNEL)
    time.sleep(0.3)
    kernel.send_signal(sig)
    kernel.wait(timeout=30)
    alive = still_running(workers, timeout_s=15)
    assert alive == [], f"{len(alive)} worker(s) still running after their kernel got {sig.name}"
