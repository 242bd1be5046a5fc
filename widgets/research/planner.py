"""Memory on paper, and a planner that picks (b, K) for a memory budget and a target effective batch.

Transformer terms at real scale (bytes; s = sequence length, b = micro-batch size, h = hidden
size, a = heads, L = layers, P = parameters):

- activations, Korthikanti et al. (2022, arXiv:2205.05198, section 4, no tensor or sequence
  parallelism): per layer s*b*h*(34 + 5*a*s/h) with 16-bit activations and 1-byte dropout masks;
  with full recomputation (checkpointing every layer) only each layer's input is kept, 2*s*b*h.
  Written out per element, e bytes per activation and m per mask: s*b*h*(16e + 2m) + a*s^2*b*(2e + m),
  which is the formula at e = 2, m = 1 and lets it be checked against fp32 measurements (e = 4).
- mixed-precision Adam, Rajbhandari et al. (2020, ZeRO, arXiv:1910.02054): 2P bytes of 16-bit
  weights, 2P of 16-bit gradients and 12P of fp32 optimizer state (master weights, momentum,
  variance): 16P in all.

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
                               element_bytes: int = 2, mask_bytes: int = 1, recompute: bool = False) -> int:
    """Korthikanti et al. (2022): activation bytes one transformer layer keeps for backward."""
    s = check_int("seq_len", seq_len, 1)
    b = check_int("micro_batch_size", micro_batch_size, 1)
    h = check_int("hidden", hidden, 1)
    a = check_int("heads", heads, 1, h)
    e = check_int("element_bytes", element_bytes, 1, 8)
    m = check_int("mask_bytes", mask_bytes, 0, 8)
    if recompute:
        return s * b * h * e  # the layer's input only (2sbh at e = 2)
    return s * b * h * (16 * e + 2 * m) + a * s * s * b * (2 * e + m)


@dataclass(frozen=True)
class PaperMemory:
    """The four terms in bytes for one micro-batch of b sequences, from the formulas above."""

    shape: TransformerShape
    micro_batch_size: int
    recompute: bool
    weights: int
    gradients: int
    optimizer_state: int
    activations: int

    @property
    def fixed(self) -> int:
        return self.weights + self.gradients + self.optimizer_state

    @property
    def total(self) -> int:
        return self.fixed + self.activations


def transformer_memory(shape: TransformerShape, micro_batch_size: int, recompute: bool = False) -> PaperMemory:
    """Mixed-precision Adam (16 bytes per parameter) and 16-bit activations of the L layers
    (embeddings, the final LayerNorm and the logits are left out, as in the paper's per-layer count)."""
    if not isinstance(shape, TransformerShape):
        raise TypeError(f"shape must be a TransformerShape (or one of PRESETS), got {type(shape).__name__}")
    b = check_int("micro_batch_size", micro_batch_size, 1)
    p = shape.parameters
    act = shape.layers * activation_bytes_per_layer(shape.seq_len, b, shape.hidden, shape.heads, recompute=recompute)
    return PaperMemory(shape, b, bool(recompute), 2 * p, 2 * p, 12 * p, act)


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


@dataclass(frozen=True)
class PlannerModel:
    """What the planner needs of a model: bytes that do not grow with b, activation bytes per example
    without and with checkpointing, and optionally a time model, seconds per micro-step =
    overhead_s + per_example_s x b (checkpointing adds one forward, taken as 1/3 of forward + backward)."""

    name: str
    fixed_bytes: int
    activation_bytes_per_example: float
    recompute_bytes_per_example: float
    overhead_s: float | None = None
    per_example_s: float | None = None

    def plans(self, memory_budget: int, effective_batch_size: int, recompute: bool = False) -> list[Plan]:
        per_example = self.recompute_bytes_per_example if recompute else self.activation_bytes_per_example
        timer = None
        if self.overhead_s is not None and self.per_example_s is not None:
            factor = 4 / 3 if recompute else 1.0
            timer = lambda b: factor * (self.overhead_s + self.per_example_s * b)  # noqa: E731
        return plan_micro_batches(self.fixed_bytes, per_example, memory_budget, effective_batch_size, timer)


def paper_planner_model(shape: TransformerShape) -> PlannerModel:
    """A preset transformer for the planner, from the formulas (mixed-precision Adam, 16-bit activations)."""
    one, ckpt = transformer_memory(shape, 1), transformer_memory(shape, 1, recompute=True)
    return PlannerModel(shape.name, one.fixed, float(one.activations), float(ckpt.activations))
