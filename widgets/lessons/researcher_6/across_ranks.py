"""Token counts across ranks on a real gloo run: each loop of `LOOPS` on windows of unequal counts, against one process,
with the W workers as data-parallel ranks (one window per imbalance) and as the context-parallel ranks of one sequence
group (one window per real-target count).

`_train` lives here because the spawned workers (`widgets.research.ddp.run_workers`) import it."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch

from widgets.core.accumulation import flat_grad
from widgets.core.config import check_int
from widgets.core.training import one_thread
from widgets.research.ddp import RankGrid, prepare_gloo_run, run_workers
from widgets.lessons.researcher_6.invariance import (
    VOCAB, all_reduce_count, compare, count_targets, make_window, one_process_gradient, per_rank_mean,
    split_context, split_ranks, sum_then_scale,
)
from widgets.research.tokens import TinyCausalLM

TARGETS_PER_ROW = 16  # rank 0's real targets per sequence; imbalance x leaves 16 / x on the others
IMBALANCES = (1, 2, 4, 8, 16)
CONTEXT_LENGTH = 33  # tokens per row of the context-parallel windows: 32 target positions, cut into W slices
CONTEXT_TARGETS = (1, 16, 24, 32)  # real targets per row there: the padding fills the last slices
LOOPS = {"per_rank_mean": per_rank_mean, "all_reduce_count": all_reduce_count, "sum_then_scale": sum_then_scale}


@dataclass(frozen=True)
class RanksConfig(RankGrid):
    """W workers, K micro-batches of b sequences per rank, one window per imbalance."""

    accumulation_steps: int = 2
    micro_batch_size: int = 2
    imbalances: tuple[int, ...] = IMBALANCES
    context_targets: tuple[int, ...] = CONTEXT_TARGETS
    seed: int = 0
    GRID_LIMITS = (4, 8, 16)  # the largest W, K and b

    def __post_init__(self):
        super().__post_init__()
        check_int("seed", self.seed, 0, 2**31 - 1)
        if not self.imbalances or any(type(x) is not int or x not in IMBALANCES for x in self.imbalances):
            raise ValueError(f"imbalances must be a non-empty tuple of {IMBALANCES} (rank 0's targets per row over "
                             f"the others': {TARGETS_PER_ROW} is divided by it), got {self.imbalances!r}")
        for i, n in enumerate(self.context_targets):
            check_int(f"context_targets[{i}]", n, 1, CONTEXT_LENGTH - 1)

    def seconds_estimate(self) -> float:
        """High: starting the workers (15 s for two on a busy 2-core machine), then a window per imbalance and loop."""
        windows = len(self.imbalances) + len(self.context_targets)
        return 10.0 + 4.0 * self.world_size + 0.05 * windows * len(LOOPS) * self.accumulation_steps


def imbalanced_window(config: RanksConfig, imbalance: int):
    """The window of one imbalance: rank 0's rows have 16 targets each, every other rank's 16 / imbalance."""
    rows = config.accumulation_steps * config.micro_batch_size  # per rank
    lengths = [TARGETS_PER_ROW + 1] * rows + [TARGETS_PER_ROW // imbalance + 1] * rows * (config.world_size - 1)
    return make_window(lengths, config.seed)  # +1: a row of n tokens has n - 1 targets


def context_window(config: RanksConfig, targets: int):
    """One data-parallel rank's window for the context-parallel run: K b rows of `targets` real targets, padded to 33 tokens."""
    rows = [targets + 1] * config.accumulation_steps * config.micro_batch_size
    return make_window(rows, config.seed, length=CONTEXT_LENGTH)


def _run_loops(model, micro_batches, world_size: int, case, out: dict) -> None:
    """Every loop of `LOOPS` on this rank's micro-batches, after one all-reduce of the count; into out["case:loop"]."""
    import torch.distributed as dist
    count = torch.tensor(sum(count_targets(labels) for _, labels in micro_batches))
    dist.all_reduce(count)  # a sum, before the first backward: the same all-ranks count on every rank
    all_ranks_count = int(count)
    for name, loop in LOOPS.items():
        model.zero_grad(set_to_none=True)
        loop(model, micro_batches, world_size, all_ranks_count)  # DDP averages .grad over the ranks
        out[f"{case}:{name}"] = flat_grad(model.module).tolist()
    out[f"{case}:counts"] = [all_ranks_count, sum(count_targets(labels) for _, labels in micro_batches)]


def _train(config: RanksConfig, rank: int) -> dict:
    from torch.nn.parallel import DistributedDataParallel
    model = DistributedDataParallel(TinyCausalLM(vocab_size=VOCAB, seed=config.seed))
    W, K = config.world_size, config.accumulation_steps
    out = {}
    for x in config.imbalances:  # W data-parallel ranks, each with its own rows
        _run_loops(model, split_ranks(imbalanced_window(config, x), W, K)[rank], W, x, out)
    for n in config.context_targets:  # one data-parallel rank's rows, each split over the W workers as CP ranks
        rows = split_ranks(context_window(config, n), 1, K)[0]
        _run_loops(model, split_context(rows, W)[rank], W, f"cp{n}", out)
    return out


@dataclass(frozen=True)
class RanksResult:
    """Per case, an imbalance (4) or a context-parallel window ("cp16", 16 real targets per row): each loop's
    gradient on every rank, the counts, and the one-process truth."""

    config: RanksConfig
    grads: dict[str, list[list[float]]]  # "case:loop" -> one flat gradient per rank
    counts: dict[int | str, list[int]]  # case -> real targets per rank
    truth: dict[int | str, list[float]]  # case -> one process's gradient on the whole window

    def ranks_agree(self, case: int | str, loop: str) -> bool:
        """DDP leaves the same gradient on every rank (exactly: the all-reduce returns one sum to all)."""
        first, *others = self.grads[f"{case}:{loop}"]
        return all(g == first for g in others)

    def _pair(self, case: int | str, loop: str) -> tuple[torch.Tensor, torch.Tensor]:
        return (torch.tensor(self.grads[f"{case}:{loop}"][0], dtype=torch.float64),
                torch.tensor(self.truth[case], dtype=torch.float64))

    def against_one_process(self, case: int | str, loop: str) -> tuple[bool, float, float]:
        """(allclose, ratio along the truth, relative error) of rank 0's gradient against one process."""
        return compare(*self._pair(case, loop))

    def cosine(self, case: int | str, loop: str) -> float:
        """cos(rank 0's gradient, one process's): its direction alone, 1 when it points the right way."""
        g, truth = self._pair(case, loop)
        return float(g @ truth / (g.norm() * truth.norm()))


def token_weights(rank_counts: Sequence[int]) -> dict[str, list[float]]:
    """The weight of one real target of each rank: 1 / (W n_r) under DDP-averaged per-rank means, 1 / N_total fixed."""
    counts = [check_int(f"rank_counts[{r}]", n, 1) for r, n in enumerate(rank_counts)]
    if not counts:
        raise ValueError("rank_counts must hold one count per rank")
    W, total = len(counts), sum(counts)
    return {"per_rank_mean": [1 / (W * n) for n in counts], "all_reduce_count": [1 / total] * W}


def run_across_ranks(config: RanksConfig | None = None, timeout_s: float = 120.0,
                     fail_on_rank: int | None = None) -> RanksResult:
    """Spawn the workers, run every window, end every process; raise DDPError if anything fails."""
    config, timeout_s, _ = prepare_gloo_run("run_across_ranks", config, RanksConfig, timeout_s, fail_on_rank)
    reports = run_workers(_train, config, config.world_size, None, timeout_s, fail_on_rank, "worker")
    W = config.world_size
    windows = {**{x: imbalanced_window(config, x) for x in config.imbalances},
               **{f"cp{n}": context_window(config, n) for n in config.context_targets}}
    grads = {f"{case}:{name}": [reports[r][f"{case}:{name}"] for r in range(W)] for case in windows for name in LOOPS}
    counts = {case: [reports[r][f"{case}:counts"][1] for r in range(W)] for case in windows}
    model = TinyCausalLM(vocab_size=VOCAB, seed=config.seed)
    with one_thread():  # a tiny model: one thread is faster
        truth = {case: one_process_gradient(model, window).tolist() for case, window in windows.items()}
    return RanksResult(config, grads, counts, truth)
