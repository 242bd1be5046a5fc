"""Developer notebook 2's checkers: the right answer passes, each typical wrong answer fails with its message."""
import pytest
import torch

from tests.exercises.exercise_support import assert_incorrect
from widgets.exercises.toolkit import Status
from widgets.lessons.developer_2.exercises import loop_exercises

LOOP = loop_exercises()


# --- boundary ------------------------------------------------------------------------------

def test_boundary_correct():
    def is_boundary(m, k, t):
        return (m + 1) % k == 0 or m == t - 1
    assert LOOP.boundary.check(is_boundary).correct


@pytest.mark.parametrize("answer, words", [
    (lambda m, k, t: (m + 1) % k == 0, ["never updates", "total_micro_steps - 1"]),
    (lambda m, k, t: m % k == 0, ["micro_step 0, K, 2K"]),
    (lambda m, k, t: m % k == 0 or m == t - 1, ["micro_step 0, K, 2K"]),
    (lambda m, k, t: m == t - 1, ["for micro_step=0, accumulation_steps=1"]),
])
def test_boundary_wrong(answer, words):
    assert_incorrect(LOOP.boundary.check(answer), *words)


def test_boundary_worked_answers_pass():
    from widgets.core.accumulation import is_update_step
    from widgets.lessons.developer_2.exercises import is_boundary

    assert LOOP.boundary.check(is_boundary).correct and LOOP.boundary.check(is_update_step).correct
    assert LOOP.boundary.check(lambda m, k, t: m == t - 1 or m % k == k - 1).correct


def test_boundary_returning_none_is_not_attempted():
    assert LOOP.boundary.check(lambda m, k, t: None).status is Status.NOT_ATTEMPTED


# --- tail_weights --------------------------------------------------------------------------

@pytest.mark.parametrize("answer", [[8 / 19, 8 / 19, 3 / 19], torch.tensor([8, 8, 3]) / 19])
def test_tail_weights_correct(answer):
    assert LOOP.tail_weights.check(answer).correct


@pytest.mark.parametrize("answer, words", [
    ([0.25, 0.25, 0.25], ["configured K = 4", "under-weighted"]),
    ([1 / 3] * 3, ["Weight by size"]),
    ([8 / 32, 8 / 32, 3 / 32], ["divided by 32"]),
    ([8, 8, 3], ["sizes themselves"]),
    ([0.5, 0.5, 0.5], ["sum to 1.5"]),
    ([0.5, 0.3, 0.2], ["not proportional"]),
    ([0.5, 0.5], ["3 of them, got 2"]),
])
def test_tail_weights_wrong(answer, words):
    assert_incorrect(LOOP.tail_weights.check(answer), *words)


# --- update_loss ---------------------------------------------------------------------------

def test_update_loss_correct():
    def update_loss(losses, sizes):
        return sum(l * n for l, n in zip(losses, sizes)) / sum(sizes)
    assert LOOP.update_loss.check(update_loss).correct


@pytest.mark.parametrize("answer, words", [
    (lambda ls, ns: ls[-1], ["last micro-batch's loss alone", "tutorials"]),
    (lambda ls, ns: ls[-1] * len(ls), ["K times the last micro-batch's loss"]),
    (lambda ls, ns: sum(ls) / len(ls) / len(ls), ["divided loss"]),
    (lambda ls, ns: ls[-1] / len(ls), ["divided loss"]),
    (lambda ls, ns: sum(ls), ["K times too big"]),
    (lambda ls, ns: sum(ls) / len(ls), ["same size", "weight each loss by its size"]),
    (lambda ls, ns: 1.0, ["your function gives 1"]),
    (lambda ls, ns: {4: 0.6, 3: 0.6211}.get(len(ls), 0.6), ["sizes [5, 1] your function"]),  # hard-coded for two cases
    (lambda ls, ns: sum(l * n for l, n in zip(ls, ns)), ["total loss", "not their mean"]),
])
def test_update_loss_wrong(answer, words):
    assert_incorrect(LOOP.update_loss.check(answer), *words)


# --- clip_position, warmup_end -------------------------------------------------------------

@pytest.mark.parametrize("answer", ["B", " b "])
def test_clip_position_correct(answer):
    assert LOOP.clip_position.check(answer).correct


@pytest.mark.parametrize("answer, words", [
    ("A", ["every backward"]), ("C", ["after optimizer.step()"]), ("D", ["after zero_grad"]), ("E", ["one of the letters"]),
    (2, ["one of the letters"]),
])
def test_clip_position_wrong(answer, words):
    assert_incorrect(LOOP.clip_position.check(answer), *words)


def test_warmup_end():
    assert LOOP.warmup_end.check(25).correct
    assert_incorrect(LOOP.warmup_end.check(100), "once per update")
    assert_incorrect(LOOP.warmup_end.check(400), "sooner, not later")
    assert_incorrect(LOOP.warmup_end.check(4), "4 is K")
    assert_incorrect(LOOP.warmup_end.check(50), "50 updates is not it")


# --- amp_order -----------------------------------------------------------------------------

@pytest.mark.parametrize("calls", [
    ["backward", "backward", "unscale", "clip", "step", "update", "zero_grad"],
    ["zero_grad", "backward", "backward", "unscale", "clip", "step", "update"],  # cleared at the start of the update
    ["backward", "backward", "unscale", "clip", "step", "zero_grad", "update"],  # update() only reads the inf check
    ["zero_grad", "backward", "backward", "unscale", "clip", "step", "update", "zero_grad"],  # redundant, harmless
])
def test_amp_order_accepts_every_valid_order(calls):
    feedback = LOOP.amp_order.check(calls)
    assert feedback.correct, feedback
    start = "before the first backward" in feedback.message
    assert start == (calls[0] == "zero_grad")  # the message says where this answer clears the pile


def test_amp_order_correct_accepts_the_real_call_names():
    spelled = ["backward", "backward", "scaler.unscale_", "clip", "scaler.step", "scaler.update()", "optimizer.zero_grad()"]
    assert LOOP.amp_order.check(spelled).correct


@pytest.mark.parametrize("answer, words", [
    (["backward", "unscale", "backward", "unscale", "clip", "step", "update", "zero_grad"], ["raises RuntimeError"]),
    (["backward", "unscale", "backward", "clip", "step", "update", "zero_grad"], ["before the last backward"]),
    (["backward", "backward", "clip", "step", "update", "zero_grad"], ["without unscale_"]),
    (["backward", "backward", "clip", "unscale", "step", "update", "zero_grad"], ["clipping before unscale_"]),
    (["backward", "zero_grad", "backward", "unscale", "clip", "step", "update"], ["wipes the first"]),
    (["zero_grad", "backward", "zero_grad", "backward", "unscale", "clip", "step", "update"], ["wipes the first"]),
    (["backward", "backward", "unscale", "zero_grad", "clip", "step", "update"], ["between unscale_ and step"]),
    (["backward", "backward", "unscale", "clip", "step", "update"], ["without zero_grad"]),
    (["backward", "backward", "unscale", "step", "clip", "update", "zero_grad"], ["after the step"]),
    (["backward", "backward", "unscale", "clip", "update", "step", "zero_grad"], ["update() before step()"]),
    (["backward", "backward", "unscale", "clip", "step", "zero_grad"], ["update x0"]),
    (["backward", "unscale", "clip", "step", "update", "zero_grad"], ["not 1 times"]),
    (["backward", "backward", "unscale", "clip", "step", "update", "zero_grad", "explode"], ["unknown call"]),
    ("backward", ["pass a list"]),
])
def test_amp_order_wrong(answer, words):
    assert_incorrect(LOOP.amp_order.check(answer), *words)


# --- tables, hard-coded answers and unusual right answers ----------------------------------

def test_boundary_a_table_of_the_small_cases_fails_on_fresh_wide_ones():
    from widgets.lessons.developer_2.exercises import _BOUNDARY_GRID

    table = {case: (case[0] + 1) % case[1] == 0 or case[0] == case[2] - 1 for case in _BOUNDARY_GRID}
    assert_incorrect(LOOP.boundary.check(lambda m, k, t: table.get((m, k, t), False)), "it returns False")
    assert_incorrect(LOOP.boundary.check(lambda m, k, t: table[(m, k, t)]), "KeyError")
    capped = lambda m, k, t: (m + 1) % k == 0 or m == t - 1 if t < 1000 else (m + 1) % k == 0  # noqa: E731
    assert_incorrect(LOOP.boundary.check(capped), "total_micro_steps=")


@pytest.mark.parametrize("answer", [
    lambda m, k, t: m + 1 == t or not (m + 1) % k,
    lambda m, k, t: bool(min(1, (m + 1) % k)) is False or m >= t - 1,
    lambda m, k, t: 1 if ((m + 1) % k == 0 or m == t - 1) else 0,  # ints, not bools
])
def test_boundary_right_answers_written_unusually_pass(answer):
    assert LOOP.boundary.check(answer).correct


def test_update_loss_a_table_of_the_three_cases_fails_on_fresh_ones():
    from widgets.lessons.developer_2.exercises import _LOSS_CASES

    table = {tuple(ls): sum(l * n for l, n in zip(ls, ns)) / sum(ns) for ls, ns in _LOSS_CASES}
    assert_incorrect(LOOP.update_loss.check(lambda ls, ns: table.get(tuple(ls), 0.5)), "for losses")
    small_only = lambda ls, ns: sum(l * n for l, n in zip(ls, ns)) / sum(ns) if max(ns) < 100 else ls[0]  # noqa: E731
    assert_incorrect(LOOP.update_loss.check(small_only), "for losses")


@pytest.mark.parametrize("answer", [
    lambda ls, ns: float(torch.tensor(ls, dtype=torch.float64) @ torch.tensor(ns, dtype=torch.float64)) / sum(ns),
    lambda ls, ns: torch.tensor(sum(l * n for l, n in zip(ls, ns)) / sum(ns)),  # a 0-d tensor
    lambda ls, ns: sum(l * (n / sum(ns)) for l, n in zip(ls, ns)),
])
def test_update_loss_right_answers_written_unusually_pass(answer):
    assert LOOP.update_loss.check(answer).correct
