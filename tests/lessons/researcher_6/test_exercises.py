"""Researcher notebook 6's checkers: right answers pass; typical wrong ones, and answers that hard-code the
prompt's example, fail with their reason."""
import pytest
import torch

from tests.exercises.exercise_support import assert_incorrect
from widgets.lessons.researcher_6.across_ranks import token_weights
from widgets.lessons.researcher_6.exercises import loss_scale, my_weights, ranks_exercises
from widgets.exercises.toolkit import Status

EX = ranks_exercises()


def test_the_set():
    assert len(EX) == 2 and EX.title == "Across ranks"


# --- weights ---------------------------------------------------------------------------------------

def weights_right(rank_counts):
    W, N = len(rank_counts), sum(rank_counts)
    return [1 / (W * n) for n in rank_counts], [1 / N] * W


def weights_tensor(rank_counts):
    counts = torch.tensor(rank_counts, dtype=torch.float64)
    return 1 / (len(rank_counts) * counts), torch.full_like(counts, 1 / counts.sum().item())


@pytest.mark.parametrize("answer", [weights_right, weights_tensor])
def test_weights_right(answer):
    assert EX.weights.check(answer).correct


@pytest.mark.parametrize("answer, words", [
    (lambda c: ([1 / n for n in c], [1 / sum(c)] * len(c)), ["divides by W once more"]),
    (lambda c: ([1 / sum(c)] * len(c), [1 / sum(c)] * len(c)), ["weight after the fix"]),
    (lambda c: ([1 / (len(c) * n) for n in c], [1 / (len(c) * sum(c))] * len(c)), ["forgets the W"]),
    (lambda c: ([1 / (len(c) * n) for n in c], [1 / (len(c) * n) for n in c]), ["whichever rank"]),
    (lambda c: [1 / n for n in c], ["two lists"]),
    (lambda c: ([1 / 600, 1 / 200], [1 / 400, 1 / 400]), ["right on the prompt's example", "one weight per rank"]),
    (lambda c: ([1 / 600, 1 / 200, 0, 0, 0][:len(c)], [1 / 400] * len(c)), ["right on the prompt's example"]),
])
def test_weights_wrong(answer, words):
    assert_incorrect(EX.weights.check(answer), *words)


def test_weights_refuses_non_functions():
    assert EX.weights.check(my_weights).correct

    def wraps_the_package(rank_counts):  # the notebook imports token_weights: a wrapper hands its answer back
        weights = token_weights(rank_counts)
        return weights["per_rank_mean"], weights["all_reduce_count"]
    assert EX.weights.check(wraps_the_package).correct
    assert_incorrect(EX.weights.check([1 / 600, 1 / 200]), "pass the function itself")
    assert EX.weights.check(...).status is Status.NOT_ATTEMPTED
    assert EX.weights.check(lambda rank_counts: None).status is Status.NOT_ATTEMPTED


# --- place_all_reduce ---------------------------------------------------------------------------------

def scale_right(micro_batch_counts, all_reduce_sum, world_size):
    return world_size / all_reduce_sum(sum(micro_batch_counts))


def scale_tensor(micro_batch_counts, all_reduce_sum, world_size):
    total = all_reduce_sum(torch.tensor(micro_batch_counts).sum())
    return torch.tensor(world_size / total)


def per_micro_batch_all_reduce(micro_batch_counts, all_reduce_sum, world_size):
    return world_size / sum(all_reduce_sum(n) for n in micro_batch_counts)


def never_all_reduces(micro_batch_counts, all_reduce_sum, world_size):
    return 1 / sum(micro_batch_counts)


def forgets_w(micro_batch_counts, all_reduce_sum, world_size):
    return 1 / all_reduce_sum(sum(micro_batch_counts))


def divides_by_k(micro_batch_counts, all_reduce_sum, world_size):
    return world_size / all_reduce_sum(sum(micro_batch_counts)) / len(micro_batch_counts)


def only_rank_0_reduces(micro_batch_counts, all_reduce_sum, world_size):
    if micro_batch_counts[0] == 30:  # rank 0 of the example
        return world_size / all_reduce_sum(sum(micro_batch_counts))
    return 2 / 72


def hard_coded(micro_batch_counts, all_reduce_sum, world_size):
    all_reduce_sum(sum(micro_batch_counts))
    return 2 / 72


@pytest.mark.parametrize("answer", [scale_right, scale_tensor])
def test_scale_right(answer):
    assert EX.place_all_reduce.check(answer).correct


@pytest.mark.parametrize("answer, words", [
    (per_micro_batch_all_reduce, ["all-reduced 3 times", "once"]),
    (never_all_reduces, ["never all-reduces", "per-rank mean"]),
    (forgets_w, ["W times too small"]),
    (divides_by_k, ["divides by K"]),
    (only_rank_0_reduces, ["equally often"]),
    (hard_coded, ["right on the prompt's example"]),
])
def test_scale_wrong(answer, words):
    assert_incorrect(EX.place_all_reduce.check(answer), *words)


def test_scale_reports_errors():
    assert EX.place_all_reduce.check(loss_scale).correct
    assert_incorrect(EX.place_all_reduce.check(lambda c, f, w: 1 / 0), "ZeroDivisionError")
    assert_incorrect(EX.place_all_reduce.check(3), "pass the function itself")
    assert EX.place_all_reduce.check(lambda counts, all_reduce_sum, world_size: None).status is Status.NOT_ATTEMPTED
    assert "all_reduce_sum" in EX.place_all_reduce.solution(anyway=True).code
