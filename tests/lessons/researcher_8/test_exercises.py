"""Researcher 8's checkers: right answers pass, typical wrong ones fail with their reason, and answers that
hard-code the notebook's example fail on the fresh cases."""
import pytest
import torch

from tests.exercises.exercise_support import assert_incorrect
from widgets.lessons.researcher_8 import losses_exercises
from widgets.lessons.researcher_8.exercises import completion_weights, dapo_normalisers, global_aux
from widgets.exercises.toolkit import Status

EX = losses_exercises()


# --- weights --------------------------------------------------------------------------------

def my_weights(lengths, loss_type, max_len):
    K, total = len(lengths), sum(sum(mb) for mb in lengths)
    table = {"grpo": lambda mb, n: 1 / (K * len(mb) * n), "dr_grpo": lambda mb, n: 1 / (K * len(mb) * max_len),
             "bnpo": lambda mb, n: 1 / (K * sum(mb)), "dapo": lambda mb, n: 1 / total}
    return [[table[loss_type](mb, n) for n in mb] for mb in lengths]


def test_weights_right():
    assert EX.weights.check(my_weights).correct
    assert EX.weights.check(lambda L, t, m: torch.tensor([w for mb in my_weights(L, t, m) for w in mb])).correct


def _except(loss_type, wrong):
    return lambda L, t, m: wrong(L, t, m) if t == loss_type else my_weights(L, t, m)


@pytest.mark.parametrize("answer, words", [
    (_except("bnpo", lambda L, t, m: my_weights(L, "dapo", m)), ["bnpo", "dapo's weight, the fix"]),
    (_except("dapo", lambda L, t, m: my_weights(L, "bnpo", m)), ["dapo", "bnpo's weight"]),
    (_except("grpo", lambda L, t, m: [[1 / (len(L) * len(mb))] * len(mb) for mb in L]), ["1 / its completion's length"]),
    (_except("grpo", lambda L, t, m: [[w * len(L) for w in mb] for mb in my_weights(L, t, m)]), ["not divided by K"]),
    (_except("dr_grpo", lambda L, t, m: [[1 / (len(L) * len(mb) * max(mb))] * len(mb) for mb in L]),
     ["longest completion"]),
    (_except("dapo", lambda L, t, m: [[w / len(L) for w in mb] for mb in my_weights(L, t, m)]), ["ms-swift"]),
])
def test_weights_typical_wrong(answer, words):
    assert_incorrect(EX.weights.check(answer), *words)


def test_weights_hard_coded_example_fails():
    example = {t: completion_weights([[3, 9], [4, 12]], t, 16) for t in ("grpo", "bnpo", "dr_grpo", "dapo")}
    assert_incorrect(EX.weights.check(lambda L, t, m: example[t]), "a fresh case")


def test_weights_placeholder_and_package():
    assert EX.weights.check(lambda L, t, m: None).status is Status.NOT_ATTEMPTED
    assert EX.weights.check(completion_weights).correct
    assert_incorrect(EX.weights.check(3), "pass the function itself")


# --- normaliser -----------------------------------------------------------------------------

def my_normalisers(tokens, K):
    out = []
    for i in range(0, len(tokens), K):
        out += [sum(tokens[i:i + K])] * len(tokens[i:i + K])
    return out


def test_normaliser_right():
    assert EX.normaliser.check(my_normalisers).correct


@pytest.mark.parametrize("answer, words", [
    (lambda t, k: [sum(t)] * len(t), ["whole generation", "#6024"]),
    (lambda t, k: list(t), ["own count, bnpo"]),
    (lambda t, k: [k * n for n in t], ["bnpo again"]),
    (lambda t, k: [sum(t[i:i + k]) for i in range(0, len(t), k)], ["one normaliser per micro-batch"]),
    (lambda t, k: [sum(t[i:i + k]) for i in range(0, len(t), k) for _ in range(k)][:len(t)] if len(t) % k == 0
     else [1] * len(t), ["a fresh case"]),  # right for whole windows only
    (lambda t, k: [80, 80, 60, 60], ["one normaliser per micro-batch: 14"]),  # the example, hard-coded
])
def test_normaliser_wrong(answer, words):
    assert_incorrect(EX.normaliser.check(answer), *words)


def test_normaliser_package_and_placeholder():
    assert EX.normaliser.check(dapo_normalisers).correct
    assert EX.normaliser.check(lambda t, k: None).status is Status.NOT_ATTEMPTED


# --- aux ------------------------------------------------------------------------------------

def my_aux(counts, prob_sums):
    n = counts.sum()
    return counts.shape[1] * ((counts.sum(0) / n) * (prob_sums.sum(0) / n)).sum()


def per_micro(counts, prob_sums):
    E = counts.shape[1]
    return [E * ((c / c.sum()) * (p / c.sum())).sum() for c, p in zip(counts, prob_sums)]


def test_aux_right():
    assert EX.aux.check(my_aux).correct
    assert EX.aux.check(lambda c, p: float(my_aux(c.tolist() and c, p))).correct


@pytest.mark.parametrize("answer, words", [
    (lambda c, p: sum(per_micro(c, p)) / len(c), ["mean of the K micro-batches"]),
    (lambda c, p: sum(per_micro(c, p)), ["not divided by", "#3359"]),
    (lambda c, p: my_aux(c, p) / c.shape[1], ["times the number of experts"]),
    (lambda c, p: (my_aux(c, p), 1.0), ["one number"]),
])
def test_aux_wrong(answer, words):
    assert_incorrect(EX.aux.check(answer), *words)


def test_aux_hard_coded_example_fails():
    from widgets.lessons.researcher_8.exercises import aux_cases
    value = global_aux(*aux_cases()[0])
    assert_incorrect(EX.aux.check(lambda c, p: value), "a fresh case")
    assert EX.aux.check(global_aux).correct
    assert EX.aux.check(lambda c, p: None).status is Status.NOT_ATTEMPTED
