"""FSDP2 (`torch.distributed.fsdp.fully_shard`) with gradient accumulation: two gloo processes on the CPU.

`run_fsdp` spawns `world_size` workers that shard a small MLP layer by layer and run one update
of K micro-steps twice: syncing (reduce-scattering) the gradient after every micro-step, and
with `set_requires_gradient_sync(False)` on all but the last micro-step (FSDP2's `no_sync`).
Each worker measures, after every micro-step, the bytes its process holds above the start of the
update (glibc's `mallinfo2`: every live allocation, so also FSDP's own unsharded gradient, which
.grad does not show while the sync is off), and counts its all-gathers and reduce-scatters by
wrapping torch.distributed's functions. Process handling is researcher_5's (`widgets.research.ddp`):
spawn, a private rendezvous, a timeout, every worker ended also on error, and each one exits by
itself if the process that started it dies.
"""
from __future__ import annotations

import ctypes
import gc
import time
from dataclasses import dataclass

import torch

from widgets.core.accumulation import GRAD_ATOL, GRAD_RTOL, flat_grad  # GRAD_*: the lab's one allclose rule
from widgets.core.config import check_float, check_int
from widgets.research.ddp import INPUTS, OUTPUTS, make_data, rank_micro_batch, run_workers, check_gloo_run

MODES = ("sync_every_micro_step", "no_sync")
# the collectives FSDP2 calls (torch 2.13: the *_single ones; older releases: *_into_tensor / *_tensor)
GATHERS = ("all_gather_single", "all_gather_into_tensor")
SCATTERS = ("reduce_scatter_single", "reduce_scatter_tensor")


@dataclass(frozen=True)
class FSDPConfig:
    world_size: int = 2
    accumulation_steps: int = 4
    micro_batch_size: int = 4
    hidden: int = 1024  # 16 -> hidden -> hidden -> 4: about 1.07 M parameters at 1024, 4.3 MB of float32 gradient
    seed: int = 0

    def __post_init__(self):
        check_int("world_size", self.world_size, 1, 4)
        check_int("accumulation_steps", self.accumulation_steps, 1, 64)
        check_int("micro_batch_size", self.micro_batch_size, 1, 256)
        check_int("hidden", self.hidden, 2, 2048)
        check_int("seed", self.seed, 0, 2**31 - 1)

    @property
    def examples_per_update(self) -> int:
        return self.world_size * self.accumulation_steps * self.micro_batch_size

    def seconds_estimate(self) -> float:
        """High: starting the workers and FSDP's first all-gathers (~10 s for two on a busy 2-core machine)."""
        return 12.0 + 4.0 * self.world_size + 0.2 * self.accumulation_steps


def make_fsdp_mlp(hidden: int, seed: int = 0) -> torch.nn.Sequential:
    """16 -> hidden -> hidden -> 4 with Tanh; the same seed gives the same weights in every process."""
    check_int("hidden", hidden, 2, 2048)  # FSDPConfig's range
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return torch.nn.Sequential(torch.nn.Linear(INPUTS, hidden), torch.nn.Tanh(), torch.nn.Linear(hidden, hidden),
                                   torch.nn.Tanh(), torch.nn.Linear(hidden, OUTPUTS))


def gradient_bytes(config: FSDPConfig) -> int:
    """Bytes of the whole float32 gradient (what one process without sharding holds)."""
    return sum(p.numel() for p in make_fsdp_mlp(config.hidden, config.seed).parameters()) * 4


class _Mallinfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in
                "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost".split()]


def process_bytes() -> int | None:
    """Bytes this process has allocated right now (glibc: small blocks in use + mmapped blocks); None off glibc."""
    try:
        libc = ctypes.CDLL(None)
        libc.mallinfo2.restype = _Mallinfo2
    except (OSError, AttributeError):
        return None
    gc.collect()  # a reference cycle can keep a micro-step's graph (and its gathered weights) until collected
    info = libc.mallinfo2()
    return int(info.uordblks + info.hblkhd)


class _Counted:
    """Wrap torch.distributed's collective `name` in this worker so that each call is counted."""

    def __init__(self, names: tuple[str, ...], counts: dict, key: str):
        import torch.distributed as dist
        self.saved = {n: getattr(dist, n) for n in names if hasattr(dist, n)}
        for name, original in self.saved.items():
            def counted(*args, _original=original, **kwargs):
                counts[key] += 1
                return _original(*args, **kwargs)
            setattr(dist, name, counted)

    def restore(self) -> None:
        import torch.distributed as dist
        for name, original in self.saved.items():
            setattr(dist, name, original)


def sharded_update(model, x, y, config: FSDPConfig, rank: int, sync_every_micro_step: bool, counts: dict) -> dict:
    """One update of K micro-steps on an FSDP2-sharded `model` (each worker runs it): the bytes this
    process holds after each micro-step above the update's start, the collectives, the full gradient."""
    K = config.accumulation_steps
    base = process_bytes()
    held = []
    counts.update(all_gathers=0, reduce_scatters=0)
    for micro_step in range(K):
        is_last = micro_step == K - 1  # the update boundary
        model.set_requires_gradient_sync(sync_every_micro_step or is_last)  # False: FSDP2's no_sync
        part = rank_micro_batch(0, rank, micro_step, config.world_size, K, config.micro_batch_size)
        loss = torch.nn.functional.mse_loss(model(x[part]), y[part]) / K  # mean over K micro-batches
        loss.backward()  # FSDP averages over the ranks when it reduce-scatters
        del loss
        held.append(None if base is None else process_bytes() - base)
    collectives = dict(counts)
    shard_bytes = sum(p.grad.to_local().numel() * p.grad.element_size() for p in model.parameters())
    gradient = torch.cat([p.grad.full_tensor().reshape(-1) for p in model.parameters()])  # gathered after counting
    model.zero_grad(set_to_none=True)
    return {"held_bytes": held, "sharded_grad_bytes": shard_bytes, "gradient": gradient.numpy().tobytes(), **collectives}


def _fsdp_job(config: FSDPConfig, rank: int) -> dict:
    """What each FSDP worker runs (in its gloo group): shard the model, warm up, run both modes."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    mesh = init_device_mesh("cpu", (config.world_size,))
    model = make_fsdp_mlp(config.hidden, config.seed)
    for layer in model:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer, mesh=mesh)  # one all-gather / reduce-scatter group per Linear
    fully_shard(model, mesh=mesh)
    x, y = make_data(config.examples_per_update, config.seed)
    counts = {"all_gathers": 0, "reduce_scatters": 0}
    counted = [_Counted(GATHERS, counts, "all_gathers"), _Counted(SCATTERS, counts, "reduce_scatters")]
    try:
        sharded_update(model, x, y, config, rank, True, counts)  # warm-up: FSDP's lazy set-up is not the gradient
        return {mode: sharded_update(model, x, y, config, rank, mode == "sync_every_micro_step", counts)
                for mode in MODES}
    finally:
        for c in counted:
            c.restore()


@dataclass(frozen=True)
class FSDPResult:
    """mode -> rank -> record (held_bytes per micro-step, collectives, the gradient as float32 bytes), and
    the one-process gradient."""

    config: FSDPConfig
    per_rank: dict[str, list[dict]]
    reference_gradient: torch.Tensor
    gradient_bytes: int
    seconds: float

    def allclose_to_single_process(self, mode: str) -> bool:
        return all(torch.allclose(self.gradient(mode, rank), self.reference_gradient, rtol=GRAD_RTOL, atol=GRAD_ATOL)
                   for rank in range(self.config.world_size))

    def gradient(self, mode: str, rank: int) -> torch.Tensor:
        """The full gradient rank `rank` ended `mode`'s update with (gathered from the shards), float32."""
        return torch.frombuffer(bytearray(self.per_rank[mode][rank]["gradient"]), dtype=torch.float32)

    def held_between_micro_steps(self, mode: str) -> int | None:
        """Most bytes any rank held after a micro-step before the last (None where not measurable)."""
        values = [b for r in self.per_rank[mode] for b in r["held_bytes"][:-1] if b is not None]
        return max(values) if values else None


def single_process_gradient(config: FSDPConfig) -> torch.Tensor:
    """The reference: one process, the whole W K b batch in one backward, same weights."""
    x, y = make_data(config.examples_per_update, config.seed)
    model = make_fsdp_mlp(config.hidden, config.seed)
    torch.nn.functional.mse_loss(model(x), y).backward()
    return flat_grad(model)


# FSDP's workers start with glibc's mmap threshold fixed (a spawned process reads it from its environment
# at start): blocks above it are mapped and given back on free, instead of glibc raising the threshold and
# keeping freed buffers resident. About 55 MB less per worker here, the same live bytes (mallinfo2 counts
# mapped blocks too).
WORKER_ENV = {"MALLOC_MMAP_THRESHOLD_": "65536"}


def run_fsdp(config: FSDPConfig | None = None, timeout_s: float = 90.0, fail_on_rank: int | None = None) -> FSDPResult:
    """Spawn the workers, wait for both modes, end every process; raise DDPError if anything fails."""
    config = config if config is not None else FSDPConfig()
    if not isinstance(config, FSDPConfig):
        raise TypeError(f"config must be an FSDPConfig, got {type(config).__name__}")
    timeout_s = check_float("timeout_s", timeout_s, 0.0, 3600.0)
    check_gloo_run(f"run_fsdp on {config}", config.world_size, fail_on_rank, config.seconds_estimate())
    start = time.perf_counter()
    reports = run_workers(_fsdp_job, config, config.world_size, None, timeout_s, fail_on_rank, "FSDP worker",
                          env=WORKER_ENV)
    per_rank = {mode: [reports[r][mode] for r in range(config.world_size)] for mode in MODES}
    return FSDPResult(config, per_rank, single_process_gradient(config), gradient_bytes(config),
                      time.perf_counter() - start)
