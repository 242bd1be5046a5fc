"""The beginner tier's checked questions: each rejects the typical wrong answers, saying why, and
accepts the right one in every form a learner might hand it over (int, float, tensor, knob).

The oracles are independent of the checkers: hand arithmetic for the counting questions, and
one real big batch (plain autograd, written out here) for the PyTorch ones.
"""
import pytest
import torch

from tests.exercises.exercise_support import assert_incorrect
from widgets.lessons.beginner_1.exercises import beginner_exercises, grad_after_backwards, knob_pile
from widgets.exercises.toolkit import Status


@pytest.fixture
def ex():
    return beginner_exercises()


def _big_batch_blame(examples: int, start: float = 0.5) -> float:
    """The oracle: one batch of x = 1..examples, y = 2x, mean squared error, one backward."""
    x = torch.arange(1.0, examples + 1.0)
    knob = torch.tensor(start, requires_grad=True)
    ((knob * x - 2 * x) ** 2).mean().backward()
    return knob.grad.item()


def test_the_set_has_at_least_four_checked_questions_each_with_hints_and_a_solution(ex):
    assert len(ex) >= 4
    for exercise in ex:
        assert exercise.check(...).status is Status.NOT_ATTEMPTED
        assert exercise.hints and exercise.check(-1.0).status is Status.INCORRECT
        assert exercise.solution().code  # shown after an attempt (the toolkit may withhold it before)


def test_the_pytorch_helpers_agree_with_autograd_done_by_hand():
    assert grad_after_backwards(1) == 3.0 and grad_after_backwards(3) == 9.0
    assert knob_pile(4, 1) == knob_pile(4, 2) == _big_batch_blame(4) == -22.5  # the notebook's numbers
    assert knob_pile(4, 2, divide=False) == 2 * knob_pile(4, 2) == -45.0
    assert torch.isclose(torch.tensor(knob_pile(6, 3)), torch.tensor(_big_batch_blame(6)))
    assert knob_pile(6, 3, divide=False) == pytest.approx(3 * _big_batch_blame(6))


@pytest.mark.parametrize(
    "name, right, wrongs",
    [
        ("trips", [4, 4.0, torch.tensor(4)], {144: "divided by b", 18: "subtraction", 30: "addition",
                                               0.25: "upside down", 3: "3 x 6"}),
        ("divide_by", [4, 4.0], {1: "classic bug", 3: "already divided", 12: "3 times too small", 6: "one mean per trip"}),
    ],
)
def test_counting_questions_accept_the_right_number_and_say_why_a_wrong_one_is_wrong(ex, name, right, wrongs):
    exercise = getattr(ex, name)
    for answer in right:
        assert exercise.check(answer).correct, (answer, exercise.check(answer))
    for answer, word in wrongs.items():
        assert_incorrect(exercise.check(answer), word)


@pytest.mark.parametrize("name", ["trips", "divide_by", "three_trips"])
def test_a_non_number_is_incorrect_and_says_a_number_is_needed(ex, name):
    assert_incorrect(getattr(ex, name).check("four"), "must be a number")


@pytest.mark.parametrize(
    "name, right, wrongs",
    [
        ("one_trip", ["B", "b", " B "], {"A": "20 bricks at once", "C": "still builds a wall"}),
        ("four_trips", ["C", "c"], {"A": "without averaging", "B": "count the trips", "D": "bigger"}),
    ],
)
def test_predictions_accept_the_letter_and_name_the_misconception_behind_each_other_one(ex, name, right, wrongs):
    exercise = getattr(ex, name)
    for answer in right:
        assert exercise.check(answer).correct, (answer, exercise.check(answer))
    for answer, word in wrongs.items():
        assert_incorrect(exercise.check(answer), word)
    for answer in ("E", 3, "BC"):
        assert_incorrect(exercise.check(answer), "one of the letters")


def test_the_four_trips_answer_is_what_the_knob_model_does():
    assert knob_pile(4, 4, divide=False) == pytest.approx(4 * knob_pile(4, 1))


def test_every_question_has_a_kind_and_at_most_two_are_arithmetic(ex):
    kinds = [e.kind for e in ex]
    assert None not in kinds
    assert kinds.count("compute") <= 2 and kinds.count("predict") >= 2 and "code" in kinds


def _three_trips(divide=True, clear_inside=False, runs=1, divisor=3):
    """A learner's loop over x = 1..6 in trips of 2, written independently of the package."""
    x = torch.arange(1.0, 7.0)
    knob = torch.tensor(0.5, requires_grad=True)
    for _ in range(runs):
        for first in (0, 2, 4):
            if clear_inside:
                knob.grad = None
            loss = ((knob * x[first:first + 2] - 2 * x[first:first + 2]) ** 2).mean()
            (loss / divisor if divide else loss).backward()
    return knob


def test_three_trips_accepts_the_pile_the_knob_and_a_plain_number(ex):
    knob = _three_trips()
    assert ex.three_trips.check(knob.grad).correct
    assert ex.three_trips.check(knob).correct  # the knob itself: its .grad is read
    assert ex.three_trips.check(_big_batch_blame(6)).correct


@pytest.mark.parametrize(
    "loop, word",
    [
        (dict(divide=False), "never divided"),
        (dict(clear_inside=True), "cleared the pile"),
        (dict(divide=False, clear_inside=True), "undivided"),
        (dict(divisor=6), "divided by 6"),
        (dict(divisor=9), "divided by 3 twice"),
        (dict(runs=2), "twice"),
    ],
)
def test_three_trips_rejects_each_classic_mistake_and_names_it(ex, loop, word):
    assert_incorrect(ex.three_trips.check(_three_trips(**loop).grad), word)


def test_three_trips_with_the_loop_left_blank_is_not_attempted_or_says_run_the_loop(ex):
    knob = torch.tensor(0.5, requires_grad=True)
    assert ex.three_trips.check(knob.grad).status is Status.NOT_ATTEMPTED  # .grad is None
    assert_incorrect(ex.three_trips.check(knob), "run your loop")


def test_an_unmatched_wrong_number_still_gets_a_message_that_is_true_for_it(ex):
    feedback = ex.three_trips.check(-1.0)
    assert_incorrect(feedback, "-1 is not the blame of the batch of 6")
    assert_incorrect(ex.trips.check(5), "5 trips of 6 carry 5 x 6 bricks")


def test_checking_leaves_the_global_random_state_alone(ex):
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    ex.three_trips.check(-45.5)
    assert torch.equal(torch.rand(3), expected)


def test_the_predictions_answers_are_computed_and_agree_with_the_oracles():
    from widgets.lessons.beginner_1.exercises import beginner_predictions

    predictions = beginner_predictions()
    assert predictions["wall"]["answer"]() == 0  # no wall before the last trip
    assert predictions["second_backward"]["answer"]() == 6.0
    assert predictions["undivided"]["answer"]() == 2 * _big_batch_blame(4) == -45.0
    for name, p in predictions.items():
        assert p["answer"]() not in p["wrong_guesses"], name  # a "wrong" guess is never the answer
