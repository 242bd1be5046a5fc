"""A real two-process gloo run: all-reduces counted, weights allclose to one process, nothing left running."""
import socket

import psutil
import pytest

from widgets.research.ddp import (
    DDPConfig, DDPError, communication_per_update, make_model, ring_allreduce_bytes, run_ddp, sampler_shards,
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
    grad_bytes = sum(p.numel() * 4 for p in make_model().parameters())
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
