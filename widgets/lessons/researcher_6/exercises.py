"""Researcher notebook 6 (across ranks): function answers checked on the prompt's example, then on seeded rank counts."""
from __future__ import annotations

import random
import threading

from widgets.exercises.toolkit import Exercise, ExerciseSet, Feedback, as_number, as_numbers, close_to, correct
from widgets.exercises.toolkit import diagnose, incorrect, not_attempted

EXAMPLE = [300, 100]  # the prompt's two ranks
EXAMPLE_MICRO = [[30, 18, 12], [5, 3, 4]]  # the prompt's rank counts per micro-batch: W = 2, K = 3


def _random_counts(seed: int) -> list[list[int]]:
    """Seeded rank counts: W from 2 to 5 ranks, K from 1 to 4 micro-batches, 1 to 200 targets each."""
    rng = random.Random(seed)
    W, K = rng.randint(2, 5), rng.randint(1, 4)
    return [[rng.randint(1, 200) for _ in range(K)] for _ in range(W)]


# --- 1. the weight of one token -----------------------------------------------------------------

def _is_list(value: object) -> bool:
    """A list, a tuple or a tensor/array with at least one dimension."""
    return isinstance(value, (list, tuple)) or getattr(value, "ndim", 0) >= 1


def _judge_weights(answer, counts: list[int]) -> Feedback | None:
    """None if right on `counts`; else what is wrong."""
    result = answer(list(counts))
    if not isinstance(result, (tuple, list)) or len(result) != 2 or not all(_is_list(r) for r in result):
        return incorrect("return two lists, (per_rank_mean, all_reduced): one weight per rank each")
    mean, fixed = (as_numbers(r, "weights") for r in result)
    W, total = len(counts), sum(counts)
    want_mean, want_fixed = my_weights(counts)
    if len(mean) != W or len(fixed) != W:
        return incorrect(f"give one weight per rank: {W} ranks here, got {len(mean)} and {len(fixed)}")
    if not close_to(mean, want_mean):
        return diagnose(mean, {
            tuple(1 / n for n in counts): "per_rank_mean: 1 / n_r is the weight inside one rank's mean; DDP then "
                                          "averages the W ranks, which divides by W once more",
            tuple(want_fixed): "per_rank_mean: 1 / N_total is the weight after the fix; with per-rank means each rank "
                               "divides by its own count n_r",
        }, "per_rank_mean is not right: rank r divides each token loss by its count n_r, then DDP averages the W ranks")
    if not close_to(fixed, want_fixed):
        return diagnose(fixed, {
            (1 / (W * total),) * W: "all_reduced: 1 / (W N_total) forgets the W the fix multiplies by before DDP "
                                    "divides by it",
        }, "all_reduced is not right: with the all-reduced count every token weighs the same, whichever rank holds it")
    return None


def _check_weights(answer: object) -> Feedback:
    if answer(list(EXAMPLE)) is None:
        return not_attempted("your function returns nothing yet: fill in its body")
    verdict = _judge_weights(answer, EXAMPLE)
    if verdict:
        return verdict
    for seed in range(5):
        counts = [sum(rank) for rank in _random_counts(seed)]
        verdict = _judge_weights(answer, counts)
        if verdict:
            return incorrect(f"right on the prompt's example, but on rank counts {counts}: {verdict.message}. "
                             "Compute the weights from `rank_counts`, for any number of ranks")
    return correct("under per-rank means a token of rank r weighs 1 / (W n_r): on 300 and 100 tokens, 1/600 "
                   "and 1/200, three times as much on the small rank. With the all-reduced count every token "
                   "weighs 1/400.")


def my_weights(rank_counts):
    """Worked answer: the weight of one real target of each rank, under each scheme."""
    W, total = len(rank_counts), sum(rank_counts)
    per_rank_mean = [1 / (W * n) for n in rank_counts]  # rank r divides by n_r, DDP divides by W
    all_reduced = [1 / total for _ in rank_counts]  # every rank divides by N_total and multiplies by W
    return per_rank_mean, all_reduced


# --- 2. where the count all-reduce goes ---------------------------------------------------------------

class _Collective:
    """A stand-in all-reduce for W threads: each call waits for every rank's call, then returns the sum."""

    def __init__(self, world_size: int):
        self.barrier = threading.Barrier(world_size, timeout=2)  # only a wrong answer ever waits it out
        self.slots = [0.0] * world_size
        self.calls = [0] * world_size

    def for_rank(self, rank: int):
        def all_reduce_sum(value):
            self.calls[rank] += 1
            self.slots[rank] = as_number(value, "the value passed to all_reduce_sum")
            self.barrier.wait()  # a collective: every rank must reach it
            total = sum(self.slots)
            self.barrier.wait()  # every rank has read the sum before the next round writes
            return total
        return all_reduce_sum


def _run_ranks(answer, micro_counts: list[list[int]]) -> tuple[list[object], list[int], list[BaseException | None]]:
    W = len(micro_counts)
    collective = _Collective(W)
    results: list[object] = [None] * W
    errors: list[BaseException | None] = [None] * W

    def rank_main(rank: int) -> None:
        try:
            results[rank] = answer(list(micro_counts[rank]), collective.for_rank(rank), W)
        except BaseException as error:  # noqa: BLE001 - the learner's error is reported, never lost
            errors[rank] = error
            collective.barrier.abort()  # release the ranks waiting for this one

    threads = [threading.Thread(target=rank_main, args=(r,), daemon=True) for r in range(W)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    return results, collective.calls, errors


def _judge_scale(answer, micro_counts: list[list[int]]) -> Feedback | None:
    W, K = len(micro_counts), len(micro_counts[0])
    total = sum(map(sum, micro_counts))
    results, calls, errors = _run_ranks(answer, micro_counts)
    if any(isinstance(e, threading.BrokenBarrierError) for e in errors) and len(set(calls)) > 1:
        return incorrect(f"the ranks called all_reduce_sum {calls} times: a collective waits for every rank, so each "
                         "rank must call it equally often, or the run hangs")
    failed = next((e for e in errors if e is not None and not isinstance(e, threading.BrokenBarrierError)), None)
    if failed is not None:
        raise failed
    values = [as_number(v, "your scale") for v in results]
    want = W / total
    if all(close_to(v, want) for v in values):
        if calls[0] > 1:
            return incorrect(f"the value is right, but each rank all-reduced {calls[0]} times: sum this rank's counts "
                             "first, then all-reduce once (one small collective per update)")
        return None
    if calls[0] == 0:
        if all(close_to(v, 1 / sum(micro_counts[r])) for r, v in enumerate(values)):
            return incorrect("your function never all-reduces: 1 / (this rank's count) is the per-rank mean, the bug")
        return incorrect("your function never all-reduces: no rank can know N_total without it")
    if all(close_to(v, 1 / total) for v in values):
        return incorrect("1 / N_total is W times too small: DDP averages the W ranks' gradients, so multiply by W")
    if all(close_to(v, want / K) for v in values):
        return incorrect("W / (N_total K) divides by K as well: the count already covers the whole window")
    if all(close_to(v, 1 / (W * total)) for v in values):
        return incorrect("1 / (W N_total): DDP already divides by W; the scale multiplies by it")
    return incorrect(f"on rank counts {micro_counts} the scale should be W / N_total = {W}/{total}")


def _check_scale(answer: object) -> Feedback:
    results, _, errors = _run_ranks(answer, EXAMPLE_MICRO)
    if all(r is None for r in results) and all(e is None for e in errors):
        return not_attempted("your function returns nothing yet: fill in its body")
    verdict = _judge_scale(answer, EXAMPLE_MICRO)
    if verdict:
        return verdict
    for seed in range(5):
        counts = _random_counts(seed)
        verdict = _judge_scale(answer, counts)
        if verdict:
            return incorrect(f"right on the prompt's example, but not on other counts: {verdict.message}. Compute "
                             "it from `micro_batch_counts`, `all_reduce_sum` and `world_size`")
    return correct("one all-reduce of this rank's summed count, before the first backward, then W / N_total: "
                   "on the example, 2/72 on both ranks.")


def loss_scale(micro_batch_counts, all_reduce_sum, world_size):
    """Worked answer: the factor each micro-batch's token-loss sum is multiplied by on this rank."""
    local = sum(micro_batch_counts)  # this rank's real targets, all micro-batches of the window
    all_ranks = all_reduce_sum(local)  # once, before the first backward: the same N_total on every rank
    return world_size / all_ranks  # DDP's mean over W ranks then leaves 1 / N_total per token


def ranks_exercises() -> ExerciseSet:
    """The exercises of researcher notebook 6."""
    return ExerciseSet("Across ranks", [
        Exercise(
            name="weights", title="The weight of one token",
            prompt="Write `my_weights(rank_counts)`: given each rank's real targets (e.g. `[300, 100]`), return two lists, "
            "`(per_rank_mean, all_reduced)`: the weight one token of each rank gets in the final gradient when each "
            "rank divides by its own count and DDP averages, and when every rank divides by the all-reduced count "
            "(times W). Checked on the example and on random counts: `ex.weights.check(my_weights)`.",
            checker=_check_weights,
            hints=["Inside rank r's mean a token weighs 1 / n_r; DDP's all-reduce then averages W ranks.",
             "With the fix each rank computes sum * W / N_total, and DDP's mean divides by W: 1 / N_total."],
            solution=my_weights,
            explanation="The per-rank mean weighs ranks equally, so a token weighs more on a rank with fewer tokens.",
        ),
        Exercise(
            name="place_all_reduce", title="Where the count all-reduce goes",
            prompt="Write `loss_scale(micro_batch_counts, all_reduce_sum, world_size)`: it runs on every rank, gets that "
            "rank's real targets per micro-batch (e.g. `[30, 18, 12]` on rank 0 and `[5, 3, 4]` on rank 1) and "
            "`all_reduce_sum(x)`, which returns the sum of x over all ranks (every rank must call it equally "
            "often). Return the factor each micro-batch's token-loss sum is multiplied by before its backward. "
            "`ex.place_all_reduce.check(loss_scale)`.",
            checker=_check_scale,
            hints=["No rank knows N_total alone: sum this rank's counts, then all-reduce that one number.",
             "DDP averages the W ranks' gradients, so the scale is W / N_total, the same on every rank."],
            solution=loss_scale,
            explanation="One small all-reduce per update, before the first backward; then every token weighs 1 / N_total.",
        ),
    ])
