"""Memory on paper, and a planner that picks (b, K) for a memory budget and a target effective batch.

Bytes of a decoder-only transformer (s sequence, b micro-batch, h hidden, a heads, L layers, V vocabulary,
P parameters; e bytes per activation, m per dropout mask):
- activations kept per layer (Korthikanti et al. 2022, arXiv:2205.05198): s*b*h*(16e + 2m) + a*s^2*b*(2e + m),
  s*b*h*(34 + 5*a*s/h) at e = 2, m = 1; fused attention (SDPA) drops the a*s^2*b term; full recomputation keeps
  each layer's input only, s*b*h*e.
- the peak of a micro-step (`PaperMemory.peak`): the most of the loss's backward (3 s*b*V at the loss's dtype,
  + the logits if kept), a layer's backward (its activations' gradients, an upper estimate, + the layer rebuilt
  under checkpointing), and a tied embedding's gradient (3 V*h).
- mixed-precision Adam (ZeRO, arXiv:1910.02054): 2P weights + 2P gradients + 12P optimizer state = 16P.
Left out: fragmentation, scratch space, the optimizer step's temporaries, communication buffers. Torch-free."""
from __future__ import annotations

from dataclasses import dataclass

from widgets.core.config import check_int


@dataclass(frozen=True)
class TransformerShape:
    """A decoder-only transformer: layers L, hidden h, heads a, sequence length s, vocabulary V."""

    name: str
    layers: int
    hidden: int
    heads: int
    seq_len: int
    vocab: int

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
    """Activation bytes one layer keeps for backward (`mask_bytes=0`: no dropout; `sdpa`: no s x s term)."""
    s = check_int("seq_len", seq_len, 1)
    b = check_int("micro_batch_size", micro_batch_size, 1)
    h = check_int("hidden", hidden, 1)
    a = check_int("heads", heads, 1, h)
    e = check_int("element_bytes", element_bytes, 1, 8)
    m = check_int("mask_bytes", mask_bytes, 0, 8)
    if recompute:
        return s * b * h * e  # the layer's input only (2sbh at e = 2)
    scores = a * s * s * b * (2 * e + m if m else e)  # softmax output, and with dropout its mask and dropped copy
    return s * b * h * (16 * e + 2 * m) + (0 if sdpa else scores)


@dataclass(frozen=True)
class Precision:
    """Bytes per element of each kind of tensor; the default is mixed-precision Adam with 1-byte dropout masks."""

    weights: int = 2
    grads: int = 2
    optimizer: int = 12       # per parameter, all of the optimizer's state
    activations: int = 2
    masks: int = 1
    logits: int = 2
    loss: int = 4             # the log-softmax and the gradients of the loss's working set
    logits_kept: bool = True


MIXED = Precision()
# what benchmarks/planner_peak.py runs on a CPU: everything float32, plain Adam (2 states), no dropout,
# the loss taken inside the step so that nothing outside holds the logits
FLOAT32 = Precision(weights=4, grads=4, optimizer=8, activations=4, masks=0, logits=4, loss=4, logits_kept=False)


@dataclass(frozen=True)
class PaperMemory:
    """The terms in bytes for a micro-batch of b sequences: the paper's four, then the peak's working sets."""

    weights: int
    gradients: int
    optimizer_state: int
    activations: int          # kept for backward by the L layers and the last LayerNorm
    loss_working: int         # at the loss's backward: log-softmax, its two gradients (+ the logits if kept)
    layer_working: int        # in a layer's backward: the gradients of one layer's activations
    recomputed_layer: int     # with checkpointing: the layer backward rebuilds first, in full (0 without)
    embedding_gradient: int   # the tied embedding's gradient, V*h, made by the output layer's backward

    @property
    def fixed(self) -> int:
        return self.weights + self.gradients + self.optimizer_state

    @property
    def paper_total(self) -> int:
        """The paper's four terms: what is held when the forward ends, before any working set."""
        return self.fixed + self.activations

    def moments(self) -> dict[str, int]:
        """Bytes beyond the fixed ones at each candidate for the peak."""
        return {
            "the loss's backward": self.activations + self.loss_working,
            "a layer's backward": (self.activations + self.recomputed_layer + self.layer_working
                                   + self.embedding_gradient),
            "the embedding's gradient": 3 * self.embedding_gradient,
        }

    @property
    def peak(self) -> int:
        """The most held at once over the micro-step (the gradient buffer already there)."""
        return self.fixed + max(self.moments().values())


def transformer_memory(shape: TransformerShape, micro_batch_size: int, recompute: bool = False,
                       sdpa: bool = False, precision: Precision = MIXED, loss_chunks: int = 1) -> PaperMemory:
    """Every term for a micro-batch of b sequences; `loss_chunks`: a chunked loss holds 1/chunks of its working set."""
    if not isinstance(shape, TransformerShape):
        raise TypeError(f"shape must be a TransformerShape (or one of PRESETS), got {type(shape).__name__}")
    if not isinstance(precision, Precision):
        raise TypeError(f"precision must be a Precision (MIXED, FLOAT32 or your own), got {type(precision).__name__}")
    b = check_int("micro_batch_size", micro_batch_size, 1)
    s, h, p, V = shape.seq_len, shape.hidden, shape.parameters, shape.vocab
    layer = activation_bytes_per_layer(s, b, h, shape.heads, precision.activations, precision.masks, sdpa=sdpa)
    kept = shape.layers * (activation_bytes_per_layer(s, b, h, shape.heads, precision.activations, recompute=True)
                           if recompute else layer) + 2 * s * b * h * precision.activations  # + the last LayerNorm's
    # input and output (the output layer keeps the latter)
    chunks = check_int("loss_chunks", loss_chunks, 1, s)
    logits_kept = s * b * V * precision.logits if precision.logits_kept else 0  # a chunked loss returns none
    loss = (s * b * V * 3 * precision.loss) // chunks + (logits_kept if chunks == 1 else 0)
    return PaperMemory(precision.weights * p, precision.grads * p, precision.optimizer * p,
                       kept, loss, layer, layer if recompute else 0, V * h * precision.grads)


@dataclass(frozen=True)
class Plan:
    """One way to make the target effective batch: K micro-batches of b, its memory and time."""

    micro_batch_size: int
    accumulation_steps: int
    memory_bytes: int
    seconds_per_update: float | None
    fits: bool


def best_plan(plans: list[Plan]) -> Plan | None:
    """The fitting plan with the largest b (fewest micro-steps, so usually the fastest); None if none fits."""
    fitting = [p for p in plans if p.fits]
    return max(fitting, key=lambda p: p.micro_batch_size) if fitting else None


ZERO_STAGES = {0: "DDP (nothing sharded)", 1: "ZeRO-1 (optimizer state)", 2: "ZeRO-2 / FSDP SHARD_GRAD_OP (+ gradients)",
               3: "ZeRO-3 / FSDP FULL_SHARD (+ weights)"}


def zero_bytes_per_rank(parameters: int, stage: int, world_size: int, grad_bytes: int = 2,
                        no_sync: bool = False) -> dict[str, int]:
    """Bytes one of N ranks holds for mixed-precision Adam under ZeRO stage 0-3 (1 shards the optimizer state, 2 also
    the gradients, 3 also the weights); `no_sync`: FSDP keeps the whole gradient on every rank until the window ends."""
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
    """How the fixed terms lie on `world_size` ranks: ZeRO `stage` 0-3, gradient bytes, `no_sync`."""

    stage: int = 0
    world_size: int = 1
    grad_bytes: int = 2
    no_sync: bool = False


@dataclass(frozen=True)
class PlannerModel:
    """What the planner needs of a model: fixed bytes, bytes per example, optionally seconds per micro-step
    (overhead_s + per_example_s x b); a measured model may give its activations only (working sets 0)."""

    name: str
    fixed_bytes: int
    activation_bytes_per_example: float
    recompute_bytes_per_example: float
    overhead_s: float | None = None
    per_example_s: float | None = None
    parameters: int | None = None
    loss_bytes_per_example: float = 0.0
    layer_bytes_per_example: float = 0.0
    embedding_gradient_bytes: float = 0.0

    def fixed(self, sharding: Sharding | None = None) -> int:
        """Bytes per rank that do not grow with b: the model's own, or ZeRO's under `sharding`."""
        if sharding is None:
            return self.fixed_bytes
        if self.parameters is None:
            raise ValueError(f"sharding needs the parameter count; {self.name!r} has only measured fixed bytes "
                             "(use sharding=None)")
        return zero_bytes_per_rank(self.parameters, sharding.stage, sharding.world_size, sharding.grad_bytes,
                                   sharding.no_sync)["total"]

    def working(self, micro_batch_size: int, recompute: bool = False) -> float:
        """Bytes beyond the fixed ones at the micro-step's peak, the most of `transformer_memory`'s three moments."""
        b = micro_batch_size
        kept = b * (self.recompute_bytes_per_example if recompute else self.activation_bytes_per_example)
        layer = b * self.layer_bytes_per_example * (2 if recompute else 1)  # rebuilt, then its gradients
        return max(kept + b * self.loss_bytes_per_example, kept + layer + self.embedding_gradient_bytes,
                   3 * self.embedding_gradient_bytes)

    def plans(self, memory_budget: int, effective_batch_size: int, recompute: bool = False,
              sharding: Sharding | None = None) -> list[Plan]:
        """Each b dividing the effective batch, with K, memory and time per update (checkpointing: 4/3 the time)."""
        fixed, n = self.fixed(sharding), effective_batch_size
        if memory_budget <= fixed:
            raise ValueError(
                f"memory_budget = {memory_budget:,} bytes is not above the parameters, gradients and optimizer state "
                f"({fixed:,} bytes): no micro-batch fits; shard the states (ZeRO) or raise the budget"
            )
        timed, factor = self.overhead_s is not None and self.per_example_s is not None, 4 / 3 if recompute else 1.0
        plans = []
        for b in (d for d in range(1, n + 1) if n % d == 0):
            memory = fixed + round(self.working(b, recompute))
            seconds = (n // b) * (factor * (self.overhead_s + self.per_example_s * b)) if timed else None
            plans.append(Plan(b, n // b, memory, seconds, memory <= memory_budget))
        return plans


def paper_planner_model(shape: TransformerShape, sdpa: bool = False) -> PlannerModel:
    """A transformer for the planner, from `transformer_memory` per sequence; `sdpa`: no s x s term."""
    one, ckpt = transformer_memory(shape, 1, sdpa=sdpa), transformer_memory(shape, 1, recompute=True, sdpa=sdpa)
    return PlannerModel(shape.name + (", SDPA attention" if sdpa else ""), one.fixed, float(one.activations),
                        float(ckpt.activations), parameters=shape.parameters,
                        loss_bytes_per_example=float(one.loss_working),
                        layer_bytes_per_example=float(one.layer_working),
                        embedding_gradient_bytes=float(one.embedding_gradient))
