"""Memory on paper, and a planner that picks (b, K) for a memory budget and a target effective batch.

Transformer terms at real scale (bytes; s = sequence length, b = micro-batch size, h = hidden
size, a = heads, L = layers, P = parameters):

- activations, Korthikanti et al. (2022, arXiv:2205.05198, section 4, no tensor or sequence
  parallelism): per layer s*b*h*(34 + 5*a*s/h) with 16-bit activations and 1-byte dropout masks;
  with full recomputation (checkpointing every layer) only each layer's input is kept, 2*s*b*h.
  Written out per element, e bytes per activation and m per mask: s*b*h*(16e + 2m) + a*s^2*b*(2e + m),
  which is the formula at e = 2, m = 1 and lets it be checked against fp32 measurements (e = 4).
  With FlashAttention / SDPA (Dao et al. 2022, arXiv:2205.14135) the s x s scores, softmax and its
  dropout mask are never stored: the a*s^2*b term drops out (`sdpa=True`).
- what the per-layer count leaves out and a plan must add: the logits, s*b*V, in fp32 for the loss
  (4 bytes each); and with checkpointing, the working set of the one layer backward recomputes,
  that layer's full activations.
- mixed-precision Adam, Rajbhandari et al. (2020, ZeRO, arXiv:1910.02054): 2P bytes of 16-bit
  weights, 2P of 16-bit gradients and 12P of fp32 optimizer state (master weights, momentum,
  variance): 16P in all; 18P when the gradients accumulate in fp32 (4P). ZeRO shards them over
  N ranks (`zero_bytes_per_rank`).

Pure torch-free Python.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

from widgets.core.config import check_float, check_int


@dataclass(frozen=True)
class TransformerShape:
    """A decoder-only transformer: layers L, hidden h, heads a, sequence length s, vocabulary V."""

    name: str
    layers: int
    hidden: int
    heads: int
    seq_len: int
    vocab: int

    def __post_init__(self):
        check_int("layers", self.layers, 1, 1000)
        check_int("hidden", self.hidden, 1, 1_000_000)
        check_int("heads", self.heads, 1, self.hidden)
        check_int("seq_len", self.seq_len, 1, 10_000_000)
        check_int("vocab", self.vocab, 1, 10_000_000)
        if self.hidden % self.heads:
            raise ValueError(f"heads must divide hidden = {self.hidden}, got heads = {self.heads}")

    @property
    def parameters(self) -> int:
        """12 L h^2 (attention 4h^2, MLP 8h^2) + 13 L h (biases, LayerNorms) + (V + s) h embeddings (tied head)."""
        L, h = self.layers, self.hidden
        return 12 * L * h * h + 13 * L * h + (self.vocab + self.seq_len) * h + 2 * h


PRESETS = {
    "GPT-2 small": TransformerShape("GPT-2 small", 12, 768, 12, 1024, 50257),
    "1B": TransformerShape("1B", 24, 2048, 16, 2048, 50257),
    "7B": TransformerShape("7B", 32, 4096, 32, 4096, 32000),
}


def activation_bytes_per_layer(seq_len: int, micro_batch_size: int, hidden: int, heads: int,
                               element_bytes: int = 2, mask_bytes: int = 1, recompute: bool = False,
                               sdpa: bool = False) -> int:
    """Korthikanti et al. (2022): activation bytes one transformer layer keeps for backward;
    `sdpa`: fused attention keeps no s x s tensor, so the a*s^2*b*(2e + m) term is dropped."""
    s = check_int("seq_len", seq_len, 1)
    b = check_int("micro_batch_size", micro_batch_size, 1)
    h = check_int("hidden", hidden, 1)
    a = check_int("heads", heads, 1, h)
    e = check_int("element_bytes", element_bytes, 1, 8)
    m = check_int("mask_bytes", mask_bytes, 0, 8)
    if recompute:
        return s * b * h * e  # the layer's input only (2sbh at e = 2)
    return s * b * h * (16 * e + 2 * m) + (0 if sdpa else a * s * s * b * (2 * e + m))


@dataclass(frozen=True)
class PaperMemory:
    """The terms in bytes for one micro-batch of b sequences, from the formulas above: the four of
    the paper's count, then the logits and the recomputed layer's working set it leaves out."""

    shape: TransformerShape
    micro_batch_size: int
    recompute: bool
    weights: int
    gradients: int
    optimizer_state: int
    activations: int          # kept for backward by the L layers
    logits: int = 0           # s*b*V in fp32, for the loss
    recompute_working: int = 0  # with checkpointing: one layer's full activations, rebuilt in backward

    @property
    def fixed(self) -> int:
        return self.weights + self.gradients + self.optimizer_state

    @property
    def total(self) -> int:
        return self.fixed + self.activations + self.logits + self.recompute_working


def transformer_memory(shape: TransformerShape, micro_batch_size: int, recompute: bool = False,
                       sdpa: bool = False, grad_bytes: int = 2, logit_bytes: int = 4) -> PaperMemory:
    """Mixed-precision Adam (2 + grad_bytes + 12 bytes per parameter), 16-bit activations of the L
    layers, the logits (s*b*V x logit_bytes) and, with `recompute`, one layer's full activations
    rebuilt during backward. Still a lower bound: embeddings, the final LayerNorm, the logits'
    gradient and the allocator's fragmentation are left out."""
    if not isinstance(shape, TransformerShape):
        raise TypeError(f"shape must be a TransformerShape (or one of PRESETS), got {type(shape).__name__}")
    b = check_int("micro_batch_size", micro_batch_size, 1)
    g = check_int("grad_bytes", grad_bytes, 1, 8)
    s, p = shape.seq_len, shape.parameters
    layer = activation_bytes_per_layer(s, b, shape.hidden, shape.heads, sdpa=sdpa)
    kept = shape.layers * (activation_bytes_per_layer(s, b, shape.hidden, shape.heads, recompute=True)
                           if recompute else layer)
    logits = s * b * shape.vocab * check_int("logit_bytes", logit_bytes, 0, 8)
    return PaperMemory(shape, b, bool(recompute), 2 * p, g * p, 12 * p, kept, logits, layer if recompute else 0)


@dataclass(frozen=True)
class Plan:
    """One way to make the target effective batch: K micro-batches of b, its memory and time."""

    micro_batch_size: int
    accumulation_steps: int
    memory_bytes: int
    seconds_per_update: float | None
    fits: bool


def plan_micro_batches(
    fixed_bytes: int, activation_bytes_per_example: float, memory_budget: int, effective_batch_size: int,
    micro_step_seconds: Callable[[int], float] | None = None,
) -> list[Plan]:
    """Every b that divides the effective batch, with K = effective_batch_size / b, its predicted
    memory (fixed + b x activations per example, bytes) and, given `micro_step_seconds(b)`, time per
    update (K x that). `fits` says whether it is within `memory_budget` (bytes)."""
    fixed = check_int("fixed_bytes", fixed_bytes, 0)
    per_example = check_float("activation_bytes_per_example", activation_bytes_per_example, 0.0, math.inf)
    budget = check_int("memory_budget", memory_budget, 1)
    n = check_int("effective_batch_size", effective_batch_size, 1, 1_000_000)
    if budget <= fixed:
        raise ValueError(
            f"memory_budget = {budget:,} bytes is not above the parameters, gradients and optimizer state "
            f"({fixed:,} bytes): no micro-batch fits; shard the states (ZeRO) or raise the budget"
        )
    plans = []
    for b in (d for d in range(1, n + 1) if n % d == 0):
        memory = fixed + round(b * per_example)
        seconds = None if micro_step_seconds is None else (n // b) * float(micro_step_seconds(b))
        plans.append(Plan(b, n // b, memory, seconds, memory <= budget))
    return plans


def best_plan(plans: list[Plan]) -> Plan | None:
    """The fitting plan with the largest b (fewest micro-steps, so usually the fastest); None if none fits."""
    fitting = [p for p in plans if p.fits]
    return max(fitting, key=lambda p: p.micro_batch_size) if fitting else None


ZERO_STAGES = {0: "DDP (nothing sharded)", 1: "ZeRO-1 (optimizer state)", 2: "ZeRO-2 / FSDP SHARD_GRAD_OP (+ gradients)",
               3: "ZeRO-3 / FSDP FULL_SHARD (+ weights)"}


def zero_bytes_per_rank(parameters: int, stage: int, world_size: int, grad_bytes: int = 2,
                        no_sync: bool = False) -> dict[str, int]:
    """Bytes one of N ranks holds for mixed-precision Adam under ZeRO stage 0-3 (Rajbhandari et al. 2020):
    16-bit weights 2P, gradients grad_bytes x P (2, or 4 for an fp32 accumulator), fp32 optimizer state
    12P; stage 1 shards the optimizer state over the N ranks, stage 2 also the gradients, stage 3 also
    the weights (FSDP FULL_SHARD). A shard is ceil(P / N) parameters (flat buffers are padded to N).

    `no_sync=True` is an accumulation micro-step under FSDP's no_sync: the gradient is kept unsharded,
    the full grad_bytes x P on every rank, until the window's last micro-step reduce-scatters it
    (meta-pytorch/tnt PR #1057: a 26B model on 16 ranks, 3.25 GB of bf16 gradient
    shards per rank, ~52 GB unsharded). Returns {"weights", "grads", "optimizer", "total"} in bytes."""
    p = check_int("parameters", parameters, 1)
    stage = check_int("stage", stage, 0, 3)
    n = check_int("world_size", world_size, 1, 1_000_000)
    g = check_int("grad_bytes", grad_bytes, 1, 8)
    if not isinstance(no_sync, bool):
        raise TypeError(f"no_sync must be True or False, got {no_sync!r}")
    shard = -(-p // n)  # ceil(P / N)
    weights = 2 * (shard if stage >= 3 else p)
    grads = g * (shard if stage >= 2 and not no_sync else p)  # no_sync: the whole gradient waits on each rank
    optimizer = 12 * (shard if stage >= 1 else p)
    return {"weights": weights, "grads": grads, "optimizer": optimizer, "total": weights + grads + optimizer}


@dataclass(frozen=True)
class Sharding:
    """How the fixed terms lie on N ranks: ZeRO `stage` 0-3 (3 = FSDP FULL_SHARD) over `world_size`
    ranks, gradients of `grad_bytes` each (4: an fp32 accumulator), `no_sync`: FSDP accumulating
    without reduce-scatter, each rank keeping the whole gradient across the window."""

    stage: int = 0
    world_size: int = 1
    grad_bytes: int = 2
    no_sync: bool = False

    def __post_init__(self):
        zero_bytes_per_rank(1, self.stage, self.world_size, self.grad_bytes, self.no_sync)  # the checks


@dataclass(frozen=True)
class PlannerModel:
    """What the planner needs of a model: bytes that do not grow with b, bytes per example (activations
    kept without and with checkpointing, the logits, the working set of the layer checkpointing
    recomputes) and optionally a time model, seconds per micro-step = overhead_s + per_example_s x b
    (checkpointing adds one forward, taken as 1/3 of forward + backward). With `parameters` known
    (mixed-precision Adam), the fixed bytes can be laid out over ranks by a `Sharding`."""

    name: str
    fixed_bytes: int
    activation_bytes_per_example: float
    recompute_bytes_per_example: float
    overhead_s: float | None = None
    per_example_s: float | None = None
    parameters: int | None = None
    logit_bytes_per_example: float = 0.0
    recompute_working_bytes_per_example: float = 0.0

    def fixed(self, sharding: Sharding | None = None) -> int:
        """Bytes per rank that do not grow with b: the model's own, or ZeRO's under `sharding`."""
        if sharding is None:
            return self.fixed_bytes
        if self.parameters is None:
            raise ValueError(f"sharding needs the parameter count; {self.name!r} has only measured fixed bytes "
                             "(use sharding=None)")
        return zero_bytes_per_rank(self.parameters, sharding.stage, sharding.world_size, sharding.grad_bytes,
                                   sharding.no_sync)["total"]

    def per_example(self, recompute: bool = False) -> float:
        """Bytes per example: activations kept (+ the recomputed layer's working set) + logits."""
        if recompute:
            return self.recompute_bytes_per_example + self.recompute_working_bytes_per_example + self.logit_bytes_per_example
        return self.activation_bytes_per_example + self.logit_bytes_per_example

    def plans(self, memory_budget: int, effective_batch_size: int, recompute: bool = False,
              sharding: Sharding | None = None) -> list[Plan]:
        timer = None
        if self.overhead_s is not None and self.per_example_s is not None:
            factor = 4 / 3 if recompute else 1.0
            timer = lambda b: factor * (self.overhead_s + self.per_example_s * b)  # noqa: E731
        return plan_micro_batches(self.fixed(sharding), self.per_example(recompute), memory_budget,
                                  effective_batch_size, timer)


def paper_planner_model(shape: TransformerShape, sdpa: bool = False) -> PlannerModel:
    """A preset transformer for the planner, from the formulas (mixed-precision Adam, 16-bit
    activations, fp32 logits); `sdpa`: fused attention, no s x s term."""
    one, ckpt = transformer_memory(shape, 1, sdpa=sdpa), transformer_memory(shape, 1, recompute=True, sdpa=sdpa)
    return PlannerModel(shape.name + (", SDPA attention" if sdpa else ""), one.fixed, float(one.activations),
                        float(ckpt.activations), parameters=shape.parameters, logit_bytes_per_example=float(one.logits),
                        recompute_working_bytes_per_example=float(ckpt.recompute_working))
