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


# --- answers that are not the learner's own, or not really accumulation ---------------------

def test_the_package_answer_handed_back_wrapped_or_copied_from_the_solution_is_rejected():
    from widgets.exercises.proof import accumulate_16

    shown = PROOF.impersonate_16.solution(anyway=True).code  # what a learner would paste
    pasted = {"torch": torch}
    exec(compile(shown, "<pasted cell>", "exec"), pasted)  # the learner's cell, not the package's code

    def wrapper(model, data, target):
        accumulate_16(model, data, target)

    assert_incorrect(PROOF.impersonate_16.check(accumulate_16), "package's own `accumulate_16`")
    assert_incorrect(PROOF.impersonate_16.check(wrapper), "calls the package's `accumulate_16`")
    assert_incorrect(PROOF.impersonate_16.check(pasted["accumulate_16"]), "copied line for line")


torch.manual_seed(0)
data16, target16 = torch.randn(16, 4), torch.randn(16, 1)  # the notebook's demonstration data
micro_batch_size, accumulation_steps = 2, 4  # the notebook's demonstration, section 3


def uses_the_notebook_data(model, data, target):
    for i in range(0, 16, 2):  # copied from the notebook's worked cell: it reads data16, not data
        (mse(model(data16[i:i + 2]), target16[i:i + 2]) / 8).backward()


def demo_loop_as_a_function(model, data, target):
    for i in range(0, 8, micro_batch_size):  # section 3's cell, pasted into the body
        loss = mse(model(data[i:i + micro_batch_size]), target[i:i + micro_batch_size])
        (loss / accumulation_steps).backward()


def summed_then_one_backward(model, data, target):
    losses = [mse(model(data[i:i + 2]), target[i:i + 2]) / 8 for i in range(0, 16, 2)]
    sum(losses).backward()  # micro-batches on the way in, one big backward at the end


@pytest.mark.parametrize("answer, words", [
    (uses_the_notebook_data, ["notebook's own 16 examples", "Use only the function's arguments"]),
    (demo_loop_as_a_function, ["cover 8 of the 16"]),
    (summed_then_one_backward, ["1 backward pass(es) for 8 micro-batches", "16 examples", "memory of the big batch"]),
])
def test_copies_of_the_demonstration_and_a_secret_big_backward_are_rejected_for_what_they_do(answer, words):
    assert_incorrect(PROOF.impersonate_16.check(answer), *words)


def test_weighting_each_micro_batch_by_its_share_is_accepted():
    def by_share(model, data, target):
        for i in range(0, 16, 2):
            (mse(model(data[i:i + 2]), target[i:i + 2]) * (2 / 16)).backward()
    assert PROOF.impersonate_16.check(by_share).correct


def test_a_helper_from_a_cell_not_run_yet_says_what_to_run_first():
    def uses_fresh_model(model, data, target):
        fresh_model()  # noqa: F821 - defined by a notebook cell that has not run
    feedback = PROOF.impersonate_16.check(uses_fresh_model)
    assert feedback.status is Status.RUN_EARLIER_CELLS and "`fresh_model`" in feedback.message
