"""The invariance oracle: one window of padded sequences over W ranks x K micro-batches of b, each sequence split
over CP more ranks, DDP-averaged, must give one process's gradient at every (W, CP, K, b). Float64: a failed
allclose is the division, not rounding."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Sequence

import torch

from widgets.core.accumulation import IGNORE_INDEX, flat_grad
from widgets.core.config import check_int, check_memory
from widgets.core.training import one_thread
from widgets.research.tokens import TinyCausalLM

VOCAB = 12
RTOL, ATOL = 1e-7, 1e-10  # float64: a real division error is far above these, rounding far below


@dataclass(frozen=True)
class Window:
    """One update's sequences: `input_ids` and `labels` (n, T) integers; padded labels are IGNORE_INDEX."""

    input_ids: torch.Tensor
    labels: torch.Tensor

    @property
    def num_sequences(self) -> int:
        return self.input_ids.shape[0]


def make_window(lengths: Sequence[int], seed: int = 0, length: int | None = None) -> Window:
    """Random tokens, row i `lengths[i]` long (>= 2, so that it has a target), right-padded to `length` (default:
    the longest row; a fixed length, as Megatron pads, leaves whole context shards of padding)."""
    length = max(lengths) if length is None else check_int("length", length, max(lengths), 4096)
    check_memory(f"make_window({len(lengths)} sequences)", 3 * len(lengths) * length * 8)
    g = torch.Generator().manual_seed(seed)
    input_ids = torch.randint(VOCAB, (len(lengths), length), generator=g)
    labels = input_ids.clone()
    for i, n in enumerate(lengths):
        input_ids[i, n:] = 0  # the pad token: the model reads it, the loss never does
        labels[i, n:] = IGNORE_INDEX
    return Window(input_ids, labels)


def random_window(num_sequences: int = 24, max_len: int = 16, seed: int = 0) -> Window:
    """`num_sequences` rows of random lengths from 2 to `max_len`: unequal counts on every rank."""
    check_int("num_sequences", num_sequences, 1, 4096)
    check_int("max_len", max_len, 2, 4096)
    check_int("seed", seed, 0, 2**31 - 1)
    g = torch.Generator().manual_seed(seed)
    return make_window(torch.randint(2, max_len + 1, (num_sequences,), generator=g).tolist(), seed)


def count_targets(labels: torch.Tensor) -> int:
    """The real targets of a micro-batch: labels after the shift (position 0 is never a target)."""
    return int((labels[:, 1:] != IGNORE_INDEX).sum())


def count_every_label(labels: torch.Tensor) -> int:
    """The over-count of transformers PR #46204: one item too many per row."""
    return int((labels != IGNORE_INDEX).sum())  # BUG: position 0 too, which the shift never predicts


def token_loss_sum(model: torch.nn.Module, input_ids: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """The summed cross-entropy of a micro-batch's real targets: logits at t predict the label at t + 1."""
    logits = model(input_ids)[:, :-1]
    return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels[:, 1:].reshape(-1),
                                             ignore_index=IGNORE_INDEX, reduction="sum")


def all_reduce_count(model, micro_batches, world_size, all_ranks_count) -> None:
    """The fix: token sums divided by the all-ranks count, times W (DDP's mean over W ranks undoes
    it)."""
    for input_ids, labels in micro_batches:
        # every token: 1 / N_total
        loss = token_loss_sum(model, input_ids, labels) * world_size / all_ranks_count
        loss.backward()


def sum_then_scale(model, micro_batches, world_size, all_ranks_count) -> None:
    """The other fix: back-propagate plain sums, scale .grad by W / N_total once after the last
    backward."""
    for input_ids, labels in micro_batches:
        token_loss_sum(model, input_ids, labels).backward()  # no count needed yet
    for p in model.parameters():
        if p.grad is not None:
            p.grad.mul_(world_size / all_ranks_count)


def per_rank_mean(model, micro_batches, world_size, all_ranks_count) -> None:
    """BUG: each rank normalises by its own count; DDP's mean then weighs ranks, not tokens."""
    # this rank's targets only
    rank_count = sum(count_targets(labels) for _, labels in micro_batches)
    for input_ids, labels in micro_batches:
        loss = token_loss_sum(model, input_ids, labels)
        loss = loss / max(rank_count, 1)  # BUG: 1 / (W n_r) per token after DDP
        loss.backward()


def window_and_k(model, micro_batches, world_size, all_ranks_count) -> None:
    """BUG (transformers #35651, ms-swift #10117): the count covers the window already, then / K again."""
    K = len(micro_batches)
    for input_ids, labels in micro_batches:
        loss = token_loss_sum(model, input_ids, labels) * world_size / all_ranks_count
        loss = loss / K  # BUG: a second division, by a layer that thinks it owns it
        loss.backward()


def engine_backward(loss: torch.Tensor, accumulation_steps: int, scale_wrt_gas: bool = True) -> None:
    """DeepSpeed's `engine.backward(loss)`: divide by the accumulation steps first (`scale_wrt_gas=True`), then backward."""
    (loss / accumulation_steps if scale_wrt_gas else loss).backward()


def engine_and_manual(model, micro_batches, world_size, all_ranks_count) -> None:
    """BUG (DeepSpeed #7439, transformers PR #35808): the loop divides by K, the engine divides again."""
    K = len(micro_batches)
    for input_ids, labels in micro_batches:
        loss = token_loss_sum(model, input_ids, labels) / count_targets(labels) / K  # the loop's own / K
        engine_backward(loss, K)  # BUG: scale_wrt_gas=True divides by K a second time


def engine_without_gas_scaling(model, micro_batches, world_size, all_ranks_count) -> None:
    """The fix of #7439: one layer divides: the all-ranks count in the loop, scale_wrt_gas=False in the engine."""
    K = len(micro_batches)
    for input_ids, labels in micro_batches:
        loss = token_loss_sum(model, input_ids, labels) * world_size / all_ranks_count
        engine_backward(loss, K, scale_wrt_gas=False)


def ignores_count(model, micro_batches, world_size, all_ranks_count) -> None:
    """BUG (transformers #37766): the trainer passes the count and skips its / K; the model's loss ignores it."""
    for input_ids, labels in micro_batches:
        loss = token_loss_sum(model, input_ids, labels) / count_targets(labels)  # BUG: its own micro-batch mean
        loss.backward()  # and no / K: the trainer trusts the model to have used the count


Loop = Callable[[torch.nn.Module, list, int, int], None]
Count = Callable[[torch.Tensor], int]


@dataclass(frozen=True)
class DivisionBug:
    """One bug, the loop and count that show it, and the fix (loop and count); the notebook cites who reported it."""

    name: str
    what: str
    loop: Loop
    fix: Loop
    count: Count = count_targets
    fix_count: Count = count_targets


BUGS = (
    DivisionBug("per_rank_mean", "each rank divides by its own count", per_rank_mean, all_reduce_count),
    DivisionBug("window_and_k", "the window count, then / K again", window_and_k, all_reduce_count),
    DivisionBug("engine_and_manual", "/ K in the loop and in the engine's backward", engine_and_manual,
                engine_without_gas_scaling),
    DivisionBug("ignores_count", "the model's loss ignores the count", ignores_count, all_reduce_count),
    DivisionBug("every_label_counted", "the shifted-off label counted once per row", all_reduce_count,
                all_reduce_count, count=count_every_label),
)


def split_ranks(window: Window, world_size: int, accumulation_steps: int) -> list[list[tuple[torch.Tensor, torch.Tensor]]]:
    """Rank r's K micro-batches of b = n / (W K) sequences: rank r takes rows [r K b, (r + 1) K b)."""
    W, K = world_size, accumulation_steps
    b = window.num_sequences // (W * K)
    rows = [slice((r * K + i) * b, (r * K + i + 1) * b) for r in range(W) for i in range(K)]
    return [[(window.input_ids[s], window.labels[s]) for s in rows[r * K:(r + 1) * K]] for r in range(W)]


def split_context(micro_batches: list, context_size: int) -> list[list[tuple[torch.Tensor, torch.Tensor]]]:
    """The CP ranks' copies of one rank's micro-batches: the same rows, each rank keeping the labels of its
    contiguous slice of target positions 1..T-1 (the rest IGNORE_INDEX), so a row's end padding falls in the last slices."""
    if context_size == 1:
        return [micro_batches]
    ranks = []
    for positions in torch.arange(1, micro_batches[0][1].shape[1]).tensor_split(context_size):
        shards = []
        for input_ids, labels in micro_batches:
            shard = torch.full_like(labels, IGNORE_INDEX)
            shard[:, positions] = labels[:, positions]
            shards.append((input_ids, shard))
        ranks.append(shards)
    return ranks


def ddp_gradient(model: torch.nn.Module, window: Window, world_size: int, accumulation_steps: int, loop: Loop,
                 count: Count = count_targets, context_size: int = 1) -> torch.Tensor:
    """The final gradient (P,) of W x CP simulated ranks, each running `loop`, averaged as DDP averages them.

    A CP rank here runs the forward on whole rows and back-propagates its slice's loss; a real one holds only its
    slice and exchanges keys and values, and the gradient summed over the CP ranks is the same."""
    ranks = [cp_rank for rank in split_ranks(window, world_size, accumulation_steps)
             for cp_rank in split_context(rank, context_size)]
    all_ranks_count = sum(count(labels) for rank in ranks for _, labels in rank)  # what the all-reduce returns
    grads = []
    for micro_batches in ranks:
        model.zero_grad(set_to_none=True)
        loop(model, micro_batches, len(ranks), all_ranks_count)  # DDP averages over all W x CP ranks
        grads.append(flat_grad(model))
    model.zero_grad(set_to_none=True)
    return torch.stack(grads).mean(dim=0)  # DDP's all-reduce: the mean of the W ranks' gradients


def one_process_gradient(model: torch.nn.Module, window: Window) -> torch.Tensor:
    """The truth (P,): one process, the whole window, torch's cross_entropy mean over the shifted targets."""
    model.zero_grad(set_to_none=True)
    logits = model(window.input_ids)[:, :-1]
    torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), window.labels[:, 1:].reshape(-1),
                                      ignore_index=IGNORE_INDEX).backward()
    grad = flat_grad(model)
    model.zero_grad(set_to_none=True)
    return grad


def grid(num_sequences: int, sizes: Sequence[int] = (1, 2, 3, 4)) -> list[tuple[int, int, int]]:
    """Every (W, K, b) with W and K in `sizes` and W K b = `num_sequences`."""
    return [(w, k, num_sequences // (w * k)) for w in sizes for k in sizes if num_sequences % (w * k) == 0]


@dataclass(frozen=True)
class GridPoint:
    """One (W, K, b), each sequence over `context_size` ranks, against the truth: allclose, the size along the
    truth, and the relative error."""

    world_size: int
    accumulation_steps: int
    micro_batch_size: int
    allclose: bool
    ratio: float  # <g, truth> / <truth, truth>: 0.25 is a quarter-size update
    rel_error: float  # |g - truth| / |truth|
    context_size: int = 1  # CP: the ranks one sequence is split over, besides the W data-parallel ones

    @property
    def cosine(self) -> float:
        """cos(g, truth), from the two numbers above: |g|^2 / |truth|^2 = rel_error^2 + 2 ratio - 1."""
        return self.ratio / math.sqrt(self.rel_error**2 + 2 * self.ratio - 1)


def compare(grad: torch.Tensor, truth: torch.Tensor) -> tuple[bool, float, float]:
    """(allclose, ratio along the truth, relative error) of a gradient against the truth."""
    ok = bool(torch.allclose(grad, truth, rtol=RTOL, atol=ATOL))
    ratio = float(grad @ truth / (truth @ truth))
    return ok, ratio, float((grad - truth).norm() / truth.norm())


def invariance_oracle(loop: Loop, count: Count = count_targets, window: Window | None = None,
                      model: torch.nn.Module | None = None, context_sizes: Sequence[int] = (1,)) -> list[GridPoint]:
    """Run `loop` at every (W, K, b) of the grid, W and K up to 4, at each CP of `context_sizes`, on the same window;
    each point against one process."""
    window = window if window is not None else random_window()
    model = model if model is not None else TinyCausalLM(vocab_size=VOCAB)
    for name, value in (("loop", loop), ("count", count)):
        if not callable(value):
            raise TypeError(f"{name} must be a function (see widgets.lessons.researcher_6.invariance), got {type(value).__name__}")
    positions = window.labels.shape[1] - 1  # the target positions a sequence is split over
    for i, cp in enumerate(context_sizes):
        check_int(f"context_sizes[{i}]", cp, 1, positions)
    points = []
    with one_thread():  # a tiny model: a second thread only waits, and on a busy machine for seconds
        truth = one_process_gradient(model, window)
        for cp in context_sizes:
            for w, k, b in grid(window.num_sequences):
                ok, ratio, err = compare(ddp_gradient(model, window, w, k, loop, count, cp), truth)
                points.append(GridPoint(w, k, b, ok, ratio, err, cp))
    return points


def holds(points: Sequence[GridPoint]) -> bool:
    """The oracle's verdict: every point of the grid allclose to one process."""
    return all(p.allclose for p in points)


def worst(points: Sequence[GridPoint]) -> GridPoint:
    """The point farthest from the truth."""
    return max(points, key=lambda p: (p.rel_error if math.isfinite(p.rel_error) else math.inf))

