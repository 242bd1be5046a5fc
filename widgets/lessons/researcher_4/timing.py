"""Time per update at a fixed effective batch as b shrinks, measured on this CPU (nothing here asserts a speed)."""
from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Callable, Sequence

import torch

from widgets.core.config import check_int, check_memory, check_time
from widgets.research.memory import TinyGPT, language_model_batch, lm_loss, micro_step_estimate


@dataclass(frozen=True)
class TimingRow:
    micro_batch_size: int
    accumulation_steps: int
    seconds_per_update: float     # median of the timed updates


def time_per_update(
    effective_batch_size: int = 32, micro_batch_sizes: Sequence[int] = (1, 2, 4, 8, 16, 32),
    repeats: int = 3, model: TinyGPT | None = None, progress: Callable | None = None,
) -> list[TimingRow]:
    """Median seconds per AdamW update of `model` (default: a 2-layer TinyGPT) at each b, after one warm-up."""
    n = check_int("effective_batch_size", effective_batch_size, 1, 4096)
    reps = check_int("repeats", repeats, 1, 100)
    sizes = [check_int("micro_batch_sizes", b, 1, n) for b in micro_batch_sizes]
    for b in sizes:
        if n % b:
            raise ValueError(f"micro_batch_sizes: {b} does not divide effective_batch_size = {n}")
    model = model if model is not None else TinyGPT(layers=2, dropout=0.0)
    if not isinstance(model, TinyGPT):
        raise TypeError(f"model must be a TinyGPT, got {type(model).__name__}")
    # the ceiling, checked on the sizes before the batch or any activation exists: the largest b's
    # micro-step in memory, every timed micro-step in time (each b runs repeats + 1 updates of K = n / b)
    shape = dict(layers=len(model.blocks), hidden=model.embed.embedding_dim, heads=model.heads, seq_len=model.seq_len,
                 vocab=model.vocab)
    what = f"time_per_update on TinyGPT({', '.join(f'{k}={v}' for k, v in shape.items())}) at effective_batch_size={n}"
    check_memory(what, max(micro_step_estimate(**shape, micro_batch_size=b)[0] for b in sizes))
    check_time(what, (reps + 1) * sum(n // b * micro_step_estimate(**shape, micro_batch_size=b)[1] for b in sizes))
    tokens, targets = language_model_batch(model, n)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    rows = []
    for b in (progress or (lambda r: r))(sizes):
        k = n // b
        times = []
        for rep in range(reps + 1):  # the first update warms the allocator up and is not timed
            start = time.perf_counter()
            for i in range(k):
                (lm_loss(model, tokens[i * b:(i + 1) * b], targets[i * b:(i + 1) * b]) / k).backward()
            opt.step()
            opt.zero_grad()
            if rep:
                times.append(time.perf_counter() - start)
        rows.append(TimingRow(b, k, statistics.median(times)))
    return rows


def fit_micro_step_time(rows: Sequence[TimingRow]) -> tuple[float, float]:
    """Least squares of seconds per update = K (overhead + per_example x b): (overhead, per_example) in seconds."""
    if len(rows) < 2:
        raise ValueError(f"rows must hold at least two TimingRow, got {len(rows)}")
    x = torch.tensor([[r.accumulation_steps, r.accumulation_steps * r.micro_batch_size] for r in rows],
                     dtype=torch.float64)
    y = torch.tensor([[r.seconds_per_update] for r in rows], dtype=torch.float64)
    overhead, per_example = torch.linalg.lstsq(x, y).solution.squeeze(1).tolist()
    return max(overhead, 0.0), max(per_example, 0.0)
