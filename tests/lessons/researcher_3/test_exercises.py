"""researcher_3's checkers: right answers pass, typical wrong ones fail with their reason."""
import pytest
import torch

from tests.exercises.exercise_support import assert_incorrect
from widgets.lessons.researcher_3.exercises import noise_exercises

R3 = noise_exercises()


def test_count():
    assert len(R3) >= 2


@pytest.mark.parametrize("answer", [32, 32.0, torch.tensor(32.00001)])
def test_b_simple_right(answer):
    assert R3.b_simple.check(answer).correct


@pytest.mark.parametrize("answer, words", [(2.5, ["5 / 2"]), (3, ["numerator"]), (16, ["Unbias"]), (1, ["|G|^2"]),
                                           (7, ["is not it"])])
def test_b_simple_wrong(answer, words):
    assert_incorrect(R3.b_simple.check(answer), *words)


def test_critical():
    assert R3.critical.check((64, 50)).correct
    assert_incorrect(R3.critical.check((64, 25)), "infinite")
    assert_incorrect(R3.critical.check((1 / 64, 50)), "E_min / S_min")
    assert_incorrect(R3.critical.check(64), "two numbers")
