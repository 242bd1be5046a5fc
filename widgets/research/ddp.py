"""A real DistributedDataParallel run on gloo (W workers, with and without `no_sync()`), and many machines on paper.

The workers always end, also when one raises, the run times out or the kernel dies. They meet through a file
store in a new mode-700 folder that no other user can reach (gloo's TCP links authenticate no one:
instructor/hub.md); an explicit `port=` uses a TCP store any local user can reach: for a machine of your own."""
from __future__ import annotations

import collections
import contextlib
import datetime
import math
import multiprocessing
import os
import pickle
import queue as queue_module
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from dataclasses import dataclass
from typing import Callable, ClassVar, Iterator
from unittest import mock

import torch

from widgets.core.accumulation import GRAD_ATOL, GRAD_RTOL, flat_weights  # GRAD_*: the lab's one allclose rule
from widgets.core.config import FLOAT32, check_float, check_int, check_memory, check_time
from widgets.core.loops import train
from widgets.core.orphans import run_with_parent
from widgets.research.no_sync import accumulate_micro_steps

INPUTS, OUTPUTS = 16, 4


class DDPError(RuntimeError):
    """The distributed run could not start or did not finish; the message says why."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def make_ddp_mlp(seed: int = 0) -> torch.nn.Module:
    """A small MLP 16 -> 32 -> 4; the same `seed` gives the same weights in every process."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return torch.nn.Sequential(torch.nn.Linear(INPUTS, 32), torch.nn.Tanh(), torch.nn.Linear(32, OUTPUTS))


def make_data(num_examples: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Inputs (num_examples, 16) and targets (num_examples, 4), float32, from `seed`."""
    check_int("num_examples", num_examples, 1)
    check_memory(f"make_data({num_examples})", num_examples * (INPUTS + OUTPUTS) * FLOAT32)
    g = torch.Generator().manual_seed(seed)
    return torch.randn(num_examples, INPUTS, generator=g), torch.randn(num_examples, OUTPUTS, generator=g)


def rank_micro_batch(update: int, rank: int, micro_step: int, world_size: int, accumulation_steps: int,
                     micro_batch_size: int) -> slice:
    """The examples rank `rank` sees at `micro_step` of `update`: a contiguous K b of update u's W K b."""
    start = (update * world_size + rank) * accumulation_steps * micro_batch_size + micro_step * micro_batch_size
    return slice(start, start + micro_batch_size)


@dataclass(frozen=True)
class RankGrid:
    """W ranks of K micro-steps of b examples, each from 1 to its `GRID_LIMITS` entry; subclasses add fields."""

    world_size: int = 2
    accumulation_steps: int = 4
    micro_batch_size: int = 4
    GRID_LIMITS: ClassVar[tuple[int, int, int]] = (8, 64, 1024)  # the largest W, K and b

    def __post_init__(self):
        for name, largest in zip(("world_size", "accumulation_steps", "micro_batch_size"), self.GRID_LIMITS):
            check_int(name, getattr(self, name), 1, largest)

    @property
    def examples_per_update(self) -> int:
        """W K b: what one update sees across all ranks."""
        return self.world_size * self.accumulation_steps * self.micro_batch_size


@dataclass(frozen=True)
class DDPConfig(RankGrid):
    num_updates: int = 3
    learning_rate: float = 0.1
    seed: int = 0

    def __post_init__(self):
        super().__post_init__()
        check_int("num_updates", self.num_updates, 1, 100)
        check_float("learning_rate", self.learning_rate, 0.0, 10.0)
        check_int("seed", self.seed, 0, 2**31 - 1)
        # every worker, and the parent for the reference, holds all W K b U examples: check before any exists
        examples = self.examples_per_update * self.num_updates
        check_memory(f"DDPConfig(world_size={self.world_size}, accumulation_steps={self.accumulation_steps}, "
                     f"micro_batch_size={self.micro_batch_size}, num_updates={self.num_updates}): each of its "
                     f"{self.world_size + 1} processes holding the {examples} examples",
                     examples * (INPUTS + OUTPUTS) * FLOAT32)

    def seconds_estimate(self) -> float:
        """A high estimate of `run_ddp`'s seconds: 10 s + 4 s per worker to start, then ~5 ms per micro-step."""
        micro_steps = 2 * self.num_updates * self.accumulation_steps
        return 10.0 + 4.0 * self.world_size + micro_steps * (5e-3 + 2e-6 * self.micro_batch_size)


def _counting_allreduce(state: collections.Counter, bucket):
    from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook
    buffer = bucket.buffer()
    state["calls"] += 1
    state["bytes"] += buffer.numel() * buffer.element_size()
    return allreduce_hook(None, bucket)  # DDP's own all-reduce (it averages over the workers)


def _train(config: DDPConfig, rank: int, use_no_sync: bool) -> dict:
    from torch.nn.parallel import DistributedDataParallel
    x, y = make_data(config.examples_per_update * config.num_updates, config.seed)
    model = DistributedDataParallel(make_ddp_mlp(config.seed))
    counter = collections.Counter()
    model.register_comm_hook(counter, _counting_allreduce)
    opt = torch.optim.SGD(model.parameters(), lr=config.learning_rate)
    K = config.accumulation_steps
    calls, sent = [], []
    for update in range(config.num_updates):
        before = counter.copy()
        micro = [rank_micro_batch(update, rank, i, config.world_size, K, config.micro_batch_size) for i in range(K)]
        accumulate_micro_steps(model, [(x[part], y[part]) for part in micro], use_no_sync)  # researcher_5's cell
        opt.step()
        opt.zero_grad()
        calls.append(counter["calls"] - before["calls"])
        sent.append(counter["bytes"] - before["bytes"])
    weights = flat_weights(model.module)
    return {"allreduces_per_update": calls, "bytes_per_update": sent, "weights": weights.tolist()}


def _gloo_worker(rank: int, rendezvous: str, results, fail_on_rank: int | None, timeout_s: float, *,
                 job: Callable, config: object) -> None:
    """One worker of `run_workers`: join the gloo group, report ("ok" | "no_backend" | "error", rank, payload), leave."""
    import torch.distributed as dist
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")  # stay on the loopback interface
    torch.set_num_threads(1)
    try:
        try:
            dist.init_process_group("gloo", init_method=rendezvous, rank=rank,
                                    world_size=config.world_size, timeout=datetime.timedelta(seconds=timeout_s))
        except Exception as error:
            results.put(("no_backend", rank, f"{type(error).__name__}: {error}"))
            return
        if fail_on_rank == rank:
            raise RuntimeError(f"worker {rank} raised on purpose (fail_on_rank={rank})")
        results.put(("ok", rank, job(config, rank)))
    except Exception:
        results.put(("error", rank, traceback.format_exc(limit=4)))
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


def _ddp_job(config: DDPConfig, rank: int) -> dict:
    """What each DDP worker runs: train without and with no_sync."""
    return {mode: _train(config, rank, use_no_sync=mode == "no_sync") for mode in ("every_micro_step", "no_sync")}


@dataclass(frozen=True)
class DDPResult:
    """What the workers reported, mode -> rank -> record, and the single-process reference weights."""

    config: DDPConfig
    per_rank: dict[str, list[dict]]
    reference_weights: list[float]
    seconds: float

    def allclose_to_single_process(self, mode: str) -> bool:
        ref = torch.tensor(self.reference_weights)
        return all(torch.allclose(torch.tensor(r["weights"]), ref, rtol=GRAD_RTOL, atol=GRAD_ATOL) for r in self.per_rank[mode])

    def max_difference(self, mode: str) -> float:
        ref = torch.tensor(self.reference_weights)
        return max(float((torch.tensor(r["weights"]) - ref).abs().max()) for r in self.per_rank[mode])


def train_single_process(config: DDPConfig) -> list[float]:
    """The reference: one process, one batch of W K b examples per update, same model and order."""
    x, y = make_data(config.examples_per_update * config.num_updates, config.seed)
    model = make_ddp_mlp(config.seed)
    batches = zip(x.split(config.examples_per_update), y.split(config.examples_per_update))
    train(model, torch.optim.SGD(model.parameters(), lr=config.learning_rate), torch.nn.functional.mse_loss, batches, 1,
          max_norm=None)
    return flat_weights(model).tolist()


# Waits for end of file on its stdin, which only the process that started it holds open: at the end of
# the run, or when that process dies however it dies (SIGKILL included), it deletes the folder.
_JANITOR = "import shutil, sys; sys.stdin.buffer.read(); shutil.rmtree(sys.argv[1], ignore_errors=True)"


@contextlib.contextmanager
def private_rendezvous() -> Iterator[str]:
    """A `file://` gloo store in a new mode-700 folder, deleted at the end and, by a janitor process, after a crash."""
    folder = tempfile.mkdtemp(prefix="lab-gloo-")  # mode 700: no other user reads, writes or lists it
    try:
        janitor = subprocess.Popen([sys.executable, "-I", "-S", "-c", _JANITOR, folder], stdin=subprocess.PIPE,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                   start_new_session=True)  # Kernel > Interrupt must not end it first
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    try:
        yield f"file://{os.path.join(folder, 'store')}"
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        janitor.stdin.close()  # its end of file: it finds nothing left to delete and exits
        try:
            janitor.wait(timeout=10)
        except subprocess.TimeoutExpired:
            janitor.kill()
            janitor.wait()


def prepare_gloo_run(function: str, config: object, config_type: type, timeout_s: float,
                     fail_on_rank: int | None, port: int | None = None):
    """The checks before any worker starts (config type, timeout, port, rank, time budget, gloo); (config, timeout_s, port)."""
    config = config if config is not None else config_type()
    if not isinstance(config, config_type):
        name = config_type.__name__  # "an FSDPConfig" (said eff-ess-dee-pee), "a DDPConfig", "a RanksConfig"
        article = "an" if name[0] in ("AEFHILMNORSX" if name[:2].isupper() else "AEIOU") else "a"
        raise TypeError(f"config must be {article} {name}, got {type(config).__name__}")
    timeout_s = check_float("timeout_s", timeout_s, 0.0, 3600.0)
    if port is not None:  # checked free before any process starts
        port = check_int("port", port, 1, 65535)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError as error:
                raise DDPError(f"the gloo backend could not start on 127.0.0.1:{port}: the port is taken "
                               f"({error.strerror}). Try again with port=None to pick a free one; no process was "
                               "started.") from None
    if fail_on_rank is not None:
        check_int("fail_on_rank", fail_on_rank, 0, config.world_size - 1)
    check_time(f"{function} on {config}", config.seconds_estimate())
    import torch.distributed as dist
    if not dist.is_available() or not dist.is_gloo_available():
        raise DDPError("this torch build has no gloo backend (torch.distributed.is_gloo_available() is False)")
    return config, timeout_s, port


def run_workers(job: Callable, config: object, world_size: int, port: int | None, timeout_s: float,
                fail_on_rank: int | None, who: str, no_backend_hint: str = "",
                env: dict[str, str] | None = None) -> dict[int, object]:
    """Run `job(config, rank)` in `world_size` gloo workers; rank -> what each returned. Every started process ends
    whatever happens; `who` names a worker in messages; `env` is set only while they start."""
    if port is not None:
        return _run_workers(job, config, world_size, f"tcp://127.0.0.1:{port}", f"127.0.0.1:{port}", timeout_s,
                            fail_on_rank, who, no_backend_hint, env)
    with private_rendezvous() as rendezvous:
        return _run_workers(job, config, world_size, rendezvous, "its private rendezvous", timeout_s, fail_on_rank,
                            who, no_backend_hint or "Were the workers killed, or is the temporary folder full?", env)


def _run_workers(job: Callable, config: object, world_size: int, rendezvous: str, where: str, timeout_s: float,
                 fail_on_rank: int | None, who: str, no_backend_hint: str, env: dict[str, str] | None) -> dict[int, object]:
    ctx = multiprocessing.get_context("spawn")
    results = ctx.Queue()
    parent = (os.getpid(), threading.current_thread() is threading.main_thread())
    heavy = pickle.dumps({"job": job, "config": config})  # unpickled in the worker only after it can die with us
    procs = [ctx.Process(target=run_with_parent, daemon=True,
                         args=(*parent, f"{__name__}:_gloo_worker", heavy, r, rendezvous, results, fail_on_rank, timeout_s))
             for r in range(world_size)]
    started: list = []  # only a started process can be joined: a failed start must not hide behind that
    start = time.perf_counter()
    reports: dict[int, object] = {}
    try:
        with mock.patch.dict(os.environ, env or {}):
            for rank, p in enumerate(procs):
                try:
                    p.start()
                except Exception as error:
                    raise DDPError(f"{who} {rank} could not be started ({type(error).__name__}: {error}); "
                                   f"the {len(started)} started before it were stopped") from error
                started.append(p)
        while len(reports) < world_size:
            left = timeout_s - (time.perf_counter() - start)
            if left <= 0:
                raise DDPError(f"the {who}s did not finish within timeout_s = {timeout_s:g} s; they were stopped")
            try:
                status, rank, payload = results.get(timeout=min(left, 0.5))
            except queue_module.Empty:
                dead = [p.exitcode for p in procs if p.exitcode not in (None, 0)]
                if dead and results.empty():
                    raise DDPError(f"a {who} died without reporting (exit code {dead[0]}); the others were stopped") from None
                continue
            if status == "no_backend":
                raise DDPError(f"the gloo backend could not start on {where} (rank {rank}): {payload}. "
                               + no_backend_hint)
            if status == "error":
                raise DDPError(f"{who} {rank} raised; every worker was stopped.\n{payload}")
            reports[rank] = payload
    finally:
        for p in started:
            p.join(timeout=2)
            if p.is_alive():
                p.terminate()
                p.join(timeout=2)
            if p.is_alive():
                p.kill()
                p.join()
        results.close()
        results.join_thread()
    return reports


def run_ddp(config: DDPConfig | None = None, timeout_s: float = 60.0, port: int | None = None,
            fail_on_rank: int | None = None) -> DDPResult:
    """Run both trainings in the workers and the single-process reference; DDPError if anything fails."""
    config, timeout_s, port = prepare_gloo_run("run_ddp", config, DDPConfig, timeout_s, fail_on_rank, port)
    start = time.perf_counter()
    hint = "" if port is None else "Is the port taken, or were the processes killed? Try again with port=None."
    reports = run_workers(_ddp_job, config, config.world_size, port, timeout_s, fail_on_rank, "DDP worker",
                          no_backend_hint=hint)
    per_rank = {mode: [reports[r][mode] for r in range(config.world_size)] for mode in ("every_micro_step", "no_sync")}
    return DDPResult(config, per_rank, train_single_process(config), time.perf_counter() - start)


# --- on paper --------------------------------------------------------------------------------

def ring_allreduce_bytes(gradient_bytes: float, workers: int) -> float:
    """Bytes each worker sends (and receives) in a ring all-reduce: 2 (N - 1) / N x the gradient."""
    g = check_float("gradient_bytes", gradient_bytes, 0.0, math.inf, low_inclusive=True)
    n = check_int("workers", workers, 1)
    return 2 * (n - 1) / n * g


def communication_per_update(gradient_bytes: float, workers: int, accumulation_steps: int, no_sync: bool) -> float:
    """Bytes each worker sends per update: one all-reduce per micro-step, or one per update with no_sync."""
    k = check_int("accumulation_steps", accumulation_steps, 1)
    return ring_allreduce_bytes(gradient_bytes, workers) * (1 if no_sync else k)


def sharded_gradient_bytes(gradient_bytes: float, workers: int, skip_sync: bool) -> float:
    """Gradient bytes per worker under ZeRO-2 / FSDP while accumulating: a 1/N shard, or all of it under no_sync."""
    g = check_float("gradient_bytes", gradient_bytes, 0.0, math.inf, low_inclusive=True)
    n = check_int("workers", workers, 1)
    return g if skip_sync else g / n


def sampler_shards(num_examples: int, world_size: int, drop_last: bool) -> list[list[int]]:
    """The indices `DistributedSampler` (no shuffle) gives each rank: padded by repeating, or the tail dropped."""
    from torch.utils.data import DistributedSampler
    n = check_int("num_examples", num_examples, 1)
    w = check_int("world_size", world_size, 1)
    return [list(DistributedSampler(range(n), num_replicas=w, rank=r, shuffle=False, drop_last=bool(drop_last)))
            for r in range(w)]
