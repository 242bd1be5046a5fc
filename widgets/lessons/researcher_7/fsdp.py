"""FSDP2 (`fully_shard`) with gradient accumulation: gloo processes on the CPU, one update in each of MODES, each
worker measuring the bytes it holds after every micro-step and counting its collectives."""
from __future__ import annotations

import contextlib
import ctypes
import gc
from dataclasses import dataclass
from typing import Callable
from unittest import mock

import torch

from widgets.core.accumulation import GRAD_ATOL, GRAD_RTOL, flat_grad  # GRAD_*: the lab's one allclose rule
from widgets.core.config import check_int
from widgets.research.ddp import (INPUTS, OUTPUTS, RankGrid, make_data, prepare_gloo_run, rank_micro_batch,
                                  run_workers)

# mode -> how its update runs: the sync every micro-step or only on the last; the weights resharded (freed
# on each rank) after backward and after forward, FSDP2's defaults, or kept gathered; bf16 compute
MODES: dict[str, dict[str, bool]] = {
    "sync_every_micro_step": dict(sync=True, reshard_after_backward=True, reshard_after_forward=True, bf16=False),
    "no_sync": dict(sync=False, reshard_after_backward=True, reshard_after_forward=True, bf16=False),
    "no_sync, kept after backward": dict(sync=False, reshard_after_backward=False, reshard_after_forward=True,
                                         bf16=False),
    "no_sync, kept throughout": dict(sync=False, reshard_after_backward=False, reshard_after_forward=False,
                                     bf16=False),
    "no_sync, bf16 compute": dict(sync=False, reshard_after_backward=True, reshard_after_forward=True, bf16=True),
}
# the collectives FSDP2 calls (torch 2.13: the *_single ones; older releases: *_into_tensor / *_tensor)
GATHERS = ("all_gather_single", "all_gather_into_tensor")
SCATTERS = ("reduce_scatter_single", "reduce_scatter_tensor")


@dataclass(frozen=True)
class FSDPConfig(RankGrid):
    hidden: int = 1024  # 16 -> hidden -> hidden -> 4: about 1.07 M parameters at 1024, 4.3 MB of float32 gradient
    seed: int = 0
    GRID_LIMITS = (4, 64, 256)  # the largest W, K and b

    def __post_init__(self):
        super().__post_init__()
        check_int("hidden", self.hidden, 2, 2048)
        check_int("seed", self.seed, 0, 2**31 - 1)

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


class _Mallinfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in
                "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost".split()]


def process_bytes() -> int | None:
    """Bytes this process has allocated right now (glibc: small blocks in use + mmapped blocks); None off glibc."""
    try:
        libc = ctypes.CDLL(None)
        libc.mallinfo2.restype = _Mallinfo2
    except (OSError, AttributeError, TypeError):  # TypeError: Windows' CDLL takes no None
        return None
    gc.collect()  # a reference cycle can keep a micro-step's graph (and its gathered weights) until collected
    info = libc.mallinfo2()
    return int(info.uordblks + info.hblkhd)


def _counted(collective: Callable, counts: dict, key: str) -> Callable:
    """`collective`, each call counted in counts[key]."""
    def call(*args, **kwargs):
        counts[key] += 1
        return collective(*args, **kwargs)
    return call


def sharded_update(model, x, y, config: FSDPConfig, rank: int, sync_every_micro_step: bool,
                   counts: dict) -> dict:
    """One update of K micro-steps on an FSDP2-sharded `model`: bytes held after each, and the
    collectives called."""
    K = config.accumulation_steps
    base = process_bytes()
    held = []
    counts.update(all_gathers=0, reduce_scatters=0)
    for micro_step in range(K):
        is_last = micro_step == K - 1  # the update boundary
        model.set_requires_gradient_sync(sync_every_micro_step or is_last)  # False: FSDP2's no_sync
        part = rank_micro_batch(0, rank, micro_step, config.world_size, K, config.micro_batch_size)
        # mean over K micro-batches
        loss = torch.nn.functional.mse_loss(model(x[part]), y[part]) / K
        loss.backward()  # FSDP averages over the ranks when it reduce-scatters
        del loss
        held.append(None if base is None else process_bytes() - base)
    return {"held_bytes": held, **counts}


def _gradient_after(model) -> dict:
    """The update's gradient: every unit back to shards, then the shard's bytes and the full gradient."""
    from torch.distributed.fsdp import FSDPModule
    for module in model.modules():
        if isinstance(module, FSDPModule):
            module.reshard()
    shard_bytes = sum(p.grad.to_local().numel() * p.grad.element_size() for p in model.parameters())
    gradient = torch.cat([p.grad.full_tensor().float().reshape(-1) for p in model.parameters()])
    model.zero_grad(set_to_none=True)
    return {"sharded_grad_bytes": shard_bytes, "gradient": gradient.numpy().tobytes()}


def _sharded_model(config: FSDPConfig, mesh, bf16: bool) -> torch.nn.Module:
    """make_fsdp_mlp, every Linear its own FSDP2 unit; `bf16`: computes in bfloat16, reduces in float32."""
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    policy = MixedPrecisionPolicy()  # float32 throughout
    if bf16:  # inputs cast to bf16, outputs back to float32 for the loss, gradients reduced in float32
        policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32,
                                      output_dtype=torch.float32)
    model = make_fsdp_mlp(config.hidden, config.seed)
    for layer in model:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer, mesh=mesh, mp_policy=policy)  # one all-gather / reduce-scatter group per Linear
    return fully_shard(model, mesh=mesh, mp_policy=policy)


def _fsdp_job(config: FSDPConfig, rank: int) -> dict:
    """What each FSDP worker runs: shard the model, warm up, run every mode (each ending resharded)."""
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    mesh = init_device_mesh("cpu", (config.world_size,))
    models = {bf16: _sharded_model(config, mesh, bf16) for bf16 in (False, True)}
    x, y = make_data(config.examples_per_update, config.seed)
    counts = {"all_gathers": 0, "reduce_scatters": 0}
    with contextlib.ExitStack() as counting:
        for name in (n for n in GATHERS + SCATTERS if hasattr(dist, n)):
            key = "all_gathers" if name in GATHERS else "reduce_scatters"
            counting.enter_context(mock.patch.object(dist, name, _counted(getattr(dist, name), counts, key)))
        for model in models.values():  # warm-up: FSDP's lazy set-up is not the gradient
            sharded_update(model, x, y, config, rank, True, counts)
            _gradient_after(model)
        reports = {}
        for mode, how in MODES.items():
            model = models[how["bf16"]]
            model.set_reshard_after_backward(how["reshard_after_backward"])
            model.set_reshard_after_forward(how["reshard_after_forward"])
            reports[mode] = {**sharded_update(model, x, y, config, rank, how["sync"], counts), **_gradient_after(model)}
            model.set_reshard_after_backward(True)
            model.set_reshard_after_forward(True)
        return reports


@dataclass(frozen=True)
class FSDPResult:
    """mode -> rank -> record (held bytes per micro-step, collectives, the gradient), and the one-process gradient."""

    config: FSDPConfig
    per_rank: dict[str, list[dict]]
    reference_gradient: torch.Tensor
    gradient_bytes: int

    def allclose_to_single_process(self, mode: str) -> bool:
        """The lab's float32 allclose rule against one process (a bf16-compute mode is not float32)."""
        return all(torch.allclose(self.gradient(mode, rank), self.reference_gradient, rtol=GRAD_RTOL, atol=GRAD_ATOL)
                   for rank in range(self.config.world_size))

    def relative_error(self, mode: str) -> float:
        """The largest |rank's gradient - one process's| / max |one process's|, over the ranks."""
        scale = float(self.reference_gradient.abs().max())
        return max(float((self.gradient(mode, rank) - self.reference_gradient).abs().max()) / scale
                   for rank in range(self.config.world_size))

    def gradient(self, mode: str, rank: int) -> torch.Tensor:
        """The full gradient rank `rank` ended `mode`'s update with (gathered from the shards), float32."""
        return torch.frombuffer(bytearray(self.per_rank[mode][rank]["gradient"]), dtype=torch.float32)


# FSDP's workers start with glibc's mmap threshold fixed (a spawned process reads it from its environment
# at start): blocks above it are mapped and given back on free, instead of glibc raising the threshold and
# keeping freed buffers resident. About 55 MB less per worker here, the same live bytes (mallinfo2 counts
# mapped blocks too).
WORKER_ENV = {"MALLOC_MMAP_THRESHOLD_": "65536"}


def run_fsdp(config: FSDPConfig | None = None, timeout_s: float = 90.0, fail_on_rank: int | None = None) -> FSDPResult:
    """Spawn the workers, wait for both modes, end every process; raise DDPError if anything fails."""
    config, timeout_s, _ = prepare_gloo_run("run_fsdp", config, FSDPConfig, timeout_s, fail_on_rank)
    reports = run_workers(_fsdp_job, config, config.world_size, None, timeout_s, fail_on_rank, "FSDP worker",
                          env=WORKER_ENV)
    per_rank = {mode: [reports[r][mode] for r in range(config.world_size)] for mode in MODES}
    x, y = make_data(config.examples_per_update, config.seed)
    model = make_fsdp_mlp(config.hidden, config.seed)
    torch.nn.functional.mse_loss(model(x), y).backward()  # the reference: one process, the whole W K b batch
    reference = flat_grad(model)
    return FSDPResult(config, per_rank, reference, reference.numel() * 4)  # the float32 gradient's bytes
