"""Answers in the forms people type (issue 36, item 5): a number in quotes is the number, a word is told a number
is needed (never "raised TypeError"), a bare letter (`answer = B`) is told to take quotes, and that note wraps at
words (its look in a browser: tests/test_browser_pace.py)."""
import sys
from types import SimpleNamespace

import pytest

from widgets.exercises.toolkit import (
    Exercise,
    ExerciseSet,
    QuotesNote,
    Status,
    choice_checker,
    number_checker,
)


def trips():
    return Exercise("trips", "How many trips?", "24 examples, 6 at a time.",
                    number_checker(4.0, {18.0: "a subtraction"}, "{value:g} is not it.", "4 trips.", "K"),
                    ["24 / 6"], "K = 24 // 6")


def one_trip():
    return Exercise("one_trip", "One trip", "A, B or C?",
                    choice_checker("B", {"A": "all at once", "C": "still a wall"}, "a smaller wall."),
                    ["one trip"], "answer = 'B'")


@pytest.mark.parametrize("typed", ["4", " 4 ", "4.0"])
def test_a_number_in_quotes_is_read_as_the_number(typed):
    feedback = trips().check(typed)
    assert feedback.status is Status.CORRECT, feedback


@pytest.mark.parametrize("typed", ["18", " 18.0 "])
def test_a_wrong_number_in_quotes_gets_the_same_diagnosis_as_without(typed):
    assert trips().check(typed).message == trips().check(float(typed)).message


@pytest.mark.parametrize("typed", ["four", "4 trips", "", [4]])
def test_anything_else_is_incorrect_saying_a_number_is_needed_never_a_python_error(typed):
    feedback = trips().check(typed)
    assert feedback.status is Status.INCORRECT and "K must be a number" in feedback.message
    assert "raised" not in feedback.message and "TypeError" not in feedback.message


def test_a_letter_outside_the_choices_is_told_the_letters_in_quotes():
    feedback = one_trip().check("D")
    assert feedback.status is Status.INCORRECT and "'A', 'B', 'C', in quotes" in feedback.message


class FakeShell:
    """What the set needs of IPython: where a NameError handler goes, and how a traceback is shown."""

    def __init__(self):
        self.handlers, self.tracebacks = {}, []

    def set_custom_exc(self, kinds, handler):
        self.handlers[kinds] = handler

    def showtraceback(self, exc_tuple, tb_offset=None):
        self.tracebacks.append(exc_tuple[1])


@pytest.fixture
def shell(monkeypatch):
    shell = FakeShell()
    monkeypatch.setitem(sys.modules, "IPython", SimpleNamespace(get_ipython=lambda: shell))
    return shell


def name_error(name):
    return NameError(f"name {name!r} is not defined", name=name)


@pytest.mark.parametrize("name", ["B", "b"])
def test_a_bare_letter_shows_the_traceback_then_says_to_put_it_in_quotes(shell, name, capsys, monkeypatch):
    shown = []
    monkeypatch.setitem(sys.modules, "IPython.display", SimpleNamespace(display=shown.append))
    ExerciseSet("Bricks", [trips(), one_trip()])
    (handler,) = shell.handlers.values()
    error = name_error(name)
    handler(shell, NameError, error, None)
    assert shell.tracebacks == [error]  # Python's own error stays
    (note,) = shown
    assert note == QuotesNote(name) and f"answer = '{name}'" in repr(note) and "run that cell" not in repr(note)


@pytest.mark.parametrize("name", ["knob", "E", "AB"])
def test_any_other_missing_name_gets_the_traceback_alone(shell, name, monkeypatch):
    shown = []
    monkeypatch.setitem(sys.modules, "IPython.display", SimpleNamespace(display=shown.append))
    ExerciseSet("Bricks", [trips(), one_trip()])
    (handler,) = shell.handlers.values()
    handler(shell, NameError, name_error(name), None)
    assert len(shell.tracebacks) == 1 and shown == []


def test_a_set_without_letter_questions_leaves_name_errors_alone(shell):
    ExerciseSet("Numbers", [trips()])
    assert shell.handlers == {}


def test_the_note_wraps_at_words_in_a_paragraph_of_its_own():
    page = QuotesNote("B")._repr_html_()
    assert page.startswith("<p ") and "<pre" not in page
    style = page[page.index('style="') + 7:page.index('">')]
    assert {"word-break: normal", "overflow-wrap: break-word", "white-space: normal"} <= set(style.split("; "))
