"""What the tests of the developer exercises share: the assertion that a checker said why an answer is wrong."""
from widgets.exercises.toolkit import Feedback, Status


def assert_incorrect(feedback: Feedback, *words: str) -> None:
    """The verdict is Incorrect and its message contains each of `words`."""
    assert feedback.status is Status.INCORRECT, feedback
    for word in words:
        assert word in feedback.message, (word, feedback.message)
