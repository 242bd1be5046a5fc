"""Developer notebook 1's checkers: the right answer passes, each typical wrong answer fails with its message."""
import pytest
import torch

from exercise_support import assert_incorrect
from widgets.exercises.toolkit import Status
from widgets.exercises.proof import proof_exercises

PROOF = proof_exercises()
mse = torch.nn.functional.mse_loss


# --- ratio ---------------------------------------------------------------------------------

@pytest.mark.parametrize("answer", [4, 4.0000005, torch.tensor([[4.0, 4.0, 4.0, 4.0000005]])])
def test_ratio_correct(answer):
    assert PROOF.ratio.check(answer).correct


@pytest.mark.parametrize("answer, words", [
    (1, ["division is still there"]),
    (0.25, ["upside down"]),
    (2, ["micro_batch_size"]),
    (8, ["number of examples"]),
    (16, ["multiplied"]),
    (3, ["Count how many"]),
    (torch.tensor([4.0, 1.0]), ["not proportional"]),
    (torch.tensor([float("nan")]), ["inf or nan"]),
    ("four", ["must be a number"]),
])
def test_ratio_wrong(answer, words):
    assert_incorrect(PROOF.ratio.check(answer), *words)


# --- impersonate_16 ------------------------------------------------------------------------

def accumulate(divide_by=8, micro=2, count=None, zero_grad=False):
    def accumulate_16(model, data, target):
        starts = list(range(0, 16, micro))[: count]
        for i in starts:
            if zero_grad:
                model.zero_grad()
            (mse(model(data[i:i + micro]), target[i:i + micro]) / divide_by).backward()
    return accumulate_16


def test_impersonate_correct_and_leaves_global_random_state_alone():
    torch.manual_seed(123)
    before = torch.random.get_rng_state()
    assert PROOF.impersonate_16.check(accumulate()).correct
    assert torch.equal(before, torch.random.get_rng_state())


@pytest.mark.parametrize("answer, words", [
    (accumulate(divide_by=4), ["2x", "K = 8"]),
    (accumulate(divide_by=1), ["8x", "not divided"]),
    (accumulate(divide_by=16), ["half", "number of examples"]),
    (accumulate(divide_by=64), ["1/8", "twice"]),
    (accumulate(divide_by=3), ["2.667x"]),
    (accumulate(micro=4, divide_by=4), ["sizes [4, 4, 4, 4]"]),
    (accumulate(micro=16, divide_by=1), ["reference itself"]),
    (accumulate(count=4), ["cover 8 of the 16"]),
    (accumulate(zero_grad=True), ["only the last micro-batch"]),
    (lambda model, data, target: model(data[:2]), ["left .grad empty"]),
    (torch.zeros(3), ["pass the function itself"]),
])
def test_impersonate_wrong(answer, words):
    assert_incorrect(PROOF.impersonate_16.check(answer), *words)


def test_impersonate_empty_function_is_not_attempted():
    assert PROOF.impersonate_16.check(lambda model, data, target: None).status is Status.NOT_ATTEMPTED


def test_impersonate_crash_is_reported():
    def crashes(model, data, target):
        raise RuntimeError("shapes do not match")
    assert_incorrect(PROOF.impersonate_16.check(crashes), "RuntimeError", "shapes do not match")
