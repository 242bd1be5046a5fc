"""Researcher notebook 7 (shards and stages): function answers judged on cases of their own, named by their mistake."""
from __future__ import annotations

from typing import Callable

from widgets.exercises.toolkit import Exercise, ExerciseSet, Feedback, as_number, close_to, correct, incorrect
from widgets.exercises.toolkit import is_placeholder, not_attempted
from widgets.lessons.researcher_7.pipeline import bubble_formula
from widgets.research.planner import zero_bytes_per_rank

BUBBLE_CASES = [(1, 1), (2, 1), (2, 8), (4, 4), (4, 16), (8, 3), (5, 32), (16, 64)]  # (stages p, micro-batches m)
BUBBLE_MISTAKES: dict[str, Callable[[int, int], float]] = {
    "(p - 1) / m is the idle time over the busy time, not over the whole run: divide by m + p - 1 slots":
        lambda p, m: (p - 1) / m,
    "(p - 1) / p is the bubble of a single micro-batch (m = 1); with m micro-batches the run is m + p - 1 slots":
        lambda p, m: (p - 1) / p,
    "the run lasts m + p - 1 slots per stage, not m + p: the last micro-batch enters after m - 1, and the pipe "
    "takes p to drain": lambda p, m: (p - 1) / (m + p),
    "that is the busy share, m / (m + p - 1); the bubble is what is left of it": lambda p, m: m / (m + p - 1),
}


def _check_bubble(answer: object) -> Feedback:
    if is_placeholder(answer(2, 8)):  # the body is still `...`
        return not_attempted("fill in the body of `bubble_fraction`, then run the cell again")
    for p, m in BUBBLE_CASES:
        value = as_number(answer(p, m), f"bubble_fraction({p}, {m})")
        if close_to(value, bubble_formula(p, m)):
            continue
        if all(close_to(as_number(answer(q, n)), value) for q, n in BUBBLE_CASES[1:]):
            return incorrect(f"your function returns {value:g} whatever p and m are: it must compute the fraction "
                             "from its arguments, not give one example's answer")
        for message, mistake in BUBBLE_MISTAKES.items():
            if all(close_to(as_number(answer(q, n)), mistake(q, n)) for q, n in BUBBLE_CASES):
                return incorrect(message + ".")
        return incorrect(f"your bubble_fraction({p}, {m}) gave {value:g}; with p = {p} stages and m = {m} micro-batches "
                         f"the grid shows {bubble_formula(p, m):.4g}")
    return correct("(p - 1) / (m + p - 1) on every (p, m) tried: the p - 1 slots to fill and drain the pipe, over "
                   "the m + p - 1 slots a stage's forwards span. It shrinks only as m grows.")


def bubble_fraction(stages: int, micro_batches: int) -> float:
    """Worked answer: p - 1 idle slots of the m + p - 1 a stage's forwards (and backwards) span."""
    return (stages - 1) / (micro_batches + stages - 1)


ZERO_CASES = [(7_000_000_000, s, 8) for s in range(4)] + [(1_000_000, 2, 4), (1_000_000, 3, 1), (3_000, 1, 16),
                                                          (10_000_000, 3, 64)]


def _zero_mistakes(parameters: int, stage: int, world_size: int) -> dict[str, float]:
    p, n = parameters, world_size
    shard = -(-p // n)
    weights = 2 * (shard if stage >= 3 else p)
    grads = 2 * (shard if stage >= 2 else p)
    optimizer = 12 * (shard if stage >= 1 else p)
    return {
        "stage 2 shards the gradients too (2 bytes each, over N ranks), not only the optimizer state":
            weights + (2 * p if stage == 2 else grads) + optimizer,
        "stage 1 shards only the optimizer state: the gradients stay whole on every rank until stage 2":
            weights + 2 * (shard if stage >= 1 else p) + optimizer,
        "stage 3 also shards the 16-bit weights (FSDP FULL_SHARD): 2 P / N": 2 * p + grads + optimizer,
        "the gradients here are 16-bit, 2 bytes each (grad_bytes = 2), not 4":
            weights + 4 * (shard if stage >= 2 else p) + optimizer,
        "Adam's fp32 state is 12 bytes per parameter: master weights, momentum and variance, 4 each":
            weights + grads + 8 * (shard if stage >= 1 else p),
        "the optimizer state is missing: mixed-precision Adam keeps 12 bytes per parameter besides the weights "
        "and gradients": weights + grads,
    }


def _check_zero(answer: object) -> Feedback:
    if is_placeholder(answer(1_000, 1, 2)):  # the body is still `...`
        return not_attempted("fill in the body of `bytes_per_rank`, then run the cell again")
    for p, stage, n in ZERO_CASES:
        value = as_number(answer(p, stage, n), f"bytes_per_rank({p}, {stage}, {n})")
        expected = zero_bytes_per_rank(p, stage, n, grad_bytes=2)["total"]
        if close_to(value, expected, rel=1e-6):
            continue
        if all(close_to(as_number(answer(*case)), value) for case in ZERO_CASES[1:]):
            return incorrect(f"your function returns {value:g} whatever the model, stage and ranks: compute it "
                             "from its arguments")
        for message, mistaken in _zero_mistakes(p, stage, n).items():
            if close_to(value, mistaken, rel=1e-6):
                return incorrect(f"your bytes_per_rank({p:_}, {stage}, {n}) gave {value:.4g}. {message[:1].upper()}"
                                 f"{message[1:]}.")
        return incorrect(f"your bytes_per_rank({p:_}, {stage}, {n}) gave {value:.4g}; it should be {expected:.4g} "
                         "(2P weights, 2P gradients, 12P optimizer state, each sharded from its stage on)")
    return correct("stage 1 shards the 12 P of optimizer state, stage 2 the gradients too, stage 3 the weights as "
                   "well: 16 P / N in all. Under FSDP's no_sync the gradients stay whole (2 P, 4 P in float32) until "
                   "the last micro-step; DeepSpeed's ZeRO-2 and ZeRO-3 refuse no_sync and reduce at every micro-step.")


def bytes_per_rank(parameters: int, stage: int, world_size: int) -> float:
    """Worked answer: mixed-precision Adam under ZeRO; a shard is ceil(P / N) parameters."""
    shard = -(-parameters // world_size)
    weights = 2 * (shard if stage >= 3 else parameters)
    grads = 2 * (shard if stage >= 2 else parameters)
    optimizer = 12 * (shard if stage >= 1 else parameters)
    return weights + grads + optimizer


def stages_exercises() -> ExerciseSet:
    """The exercises of researcher notebook 7."""
    return ExerciseSet("Shards and stages", [
        Exercise(
            name="bubble", title="The pipeline bubble",
            prompt="Write `bubble_fraction(stages, micro_batches)`: the share of a GPipe or 1F1B timeline's stage-slots "
            "that stand idle, for any p and m (forward and backward one slot each). "
            "`ex.bubble.check(bubble_fraction)`.",
            checker=_check_bubble,
            hints=["Count on the grid: each stage does 2m slots of work; how long does the whole run last?",
             "The first micro-batch needs p - 1 slots to reach the last stage, and its gradient p - 1 to come back.",
             "The run lasts 2 (m + p - 1) slots; the idle share is what is not 2m of them."],
            solution=bubble_fraction,
            explanation="Fill and drain cost p - 1 slots whatever m is, so a pipeline needs many micro-batches: m >> p.",
        ),
        Exercise(
            name="zero_bytes", title="ZeRO bytes per rank",
            prompt="Write `bytes_per_rank(parameters, stage, world_size)`: the bytes one rank holds for mixed-precision "
            "Adam (2-byte weights, 2-byte gradients, 12 bytes of fp32 optimizer state per parameter) under ZeRO "
            "stage 0-3, a shard being ceil(P / N) parameters. `ex.zero_bytes.check(bytes_per_rank)`.",
            checker=_check_zero,
            hints=["Stage 0 is plain data parallelism: 16 bytes per parameter on every rank.",
             "Stage 1 shards the optimizer state, stage 2 also the gradients, stage 3 also the weights.",
             "Sharded means ceil(P / N) parameters per rank: -(-P // N) in Python."],
            solution=bytes_per_rank,
            explanation="Each stage divides one more term by N; stage 3 reaches 16 P / N.",
        ),
    ])
