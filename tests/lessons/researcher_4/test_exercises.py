"""researcher_4's checkers: right answers pass, typical wrong ones fail with their reason."""

from tests.exercises.exercise_support import assert_incorrect
from widgets.lessons.researcher_4.exercises import memory_exercises

R4 = memory_exercises()


def test_count():
    assert len(R4) >= 2


def test_adam_bytes():
    assert R4.adam_bytes.check(24e9).correct
    assert_incorrect(R4.adam_bytes.check(18e9), "optimizer state alone")
    assert_incorrect(R4.adam_bytes.check(6e9), "16-bit weights and gradients")


def test_plan():
    assert R4.plan.check((8, 8)).correct
    assert_incorrect(R4.plan.check((16, 4)), "over the")
    assert_incorrect(R4.plan.check((4, 16)), "larger micro-batch")
    assert_incorrect(R4.plan.check((8, 4)), "target effective batch")
