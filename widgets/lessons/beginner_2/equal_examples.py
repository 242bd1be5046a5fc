"""Accumulation against small batches at equal examples (and so equal passes): the explorer compares at equal
updates, where its small batch sees 1/K of the examples; here the small batches step on every micro-batch."""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

from widgets.core.accumulation import is_update_step
from widgets.core.config import AccumulationConfig, check_config
from widgets.core.training import run_regimes


@dataclass(frozen=True)
class EqualExamples:
    """The accumulated run and small batches stepping on every micro-batch, read after the same examples."""

    examples_seen: list[int]  # after each update of the accumulated run
    accumulated: list[float]  # loss on all examples after each update (K micro-batches, one step)
    small_every_micro_batch: list[float]  # loss after the same examples, one step per micro-batch


def compare_at_equal_examples(config: AccumulationConfig) -> EqualExamples:
    """Train `config` without its mistake, and small batches over every micro-batch of the same draws
    (a warmup counted in examples too: K x W steps)."""
    check_config(config)
    clean = replace(config, mistake=None)
    record = run_regimes(clean)
    K, total = config.accumulation_steps, config.total_micro_steps
    every = run_regimes(replace(clean, accumulation_steps=1, num_updates=total, tail_micro_batches=0,
                                warmup_updates=min(1000, config.warmup_updates * K)))
    ends = [i for i in range(total) if is_update_step(i, K, total)]  # the micro-step that ends each update
    losses = every.eval_loss["big_batch"]
    seen = [(i + 1) * config.micro_batch_size for i in ends]
    return EqualExamples(
        examples_seen=seen[: len(record.eval_loss["accumulated"])],
        accumulated=record.eval_loss["accumulated"],
        small_every_micro_batch=[losses[i] if i < len(losses) else math.nan for i in ends],
    )
