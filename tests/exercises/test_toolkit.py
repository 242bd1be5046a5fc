"""The exercise toolkit: verdicts, placeholders, graded hints, solutions and their renderings."""
import sys

import pytest

from widgets.exercises.toolkit import (
    Exercise,
    ExerciseSet,
    Feedback,
    Status,
    as_number,
    as_numbers,
    close_to,
    correct,
    diagnose,
    incorrect,
    not_attempted,
    two_numbers,
    Wrong,
)


def _is_four(x):
    if x == 4:
        return correct("four it is.")
    if x == 2:
        raise ZeroDivisionError("learner's function blew up")
    return incorrect(f"{x} is not four.")


def make_exercise():
    return Exercise("four", "Find four", "Pass the number four.", _is_four,
                    ["It is even.", "It is 2 + 2.", "It is 4."], "answer = 4", "Two plus two.")


def test_correct_incorrect_and_not_attempted():
    ex = make_exercise()
    assert ex.check(4).status is Status.CORRECT and ex.check(4).correct
    wrong = ex.check(5)
    assert wrong.status is Status.INCORRECT and wrong.message == "5 is not four."
    for blank in (None, ...):
        assert ex.check(blank).status is Status.NOT_ATTEMPTED
    assert ex.check().status is Status.NOT_ATTEMPTED


def test_an_exception_while_checking_becomes_incorrect_naming_it():
    feedback = make_exercise().check(2)
    assert feedback.status is Status.INCORRECT
    assert "ZeroDivisionError" in feedback.message and "blew up" in feedback.message


def test_feedback_names_the_exercise_and_renders_deterministically():
    feedback = make_exercise().check(5)
    assert feedback.exercise == "Find four"
    assert repr(feedback) == "Find four: Incorrect. 5 is not four."
    assert "✗ Incorrect." in feedback._repr_markdown_()
    assert repr(make_exercise().check(...)).startswith("Find four: Not attempted. Replace the `...`")


def test_hints_come_one_at_a_time_and_stop_at_the_last():
    ex = make_exercise()
    hints = [ex.hint() for _ in range(5)]
    assert [h.number for h in hints] == [1, 2, 3, 3, 3] and hints[1].text == "It is 2 + 2."
    assert repr(hints[0]) == "Find four: hint 1 of 3. It is even."
    assert "ask again" in hints[0]._repr_markdown_() and "ask again" not in hints[2]._repr_markdown_()


def test_solution_holds_code_and_renders_a_code_block():
    solution = make_exercise().solution(anyway=True)
    assert solution.code == "answer = 4"
    assert "```python\nanswer = 4\n```" in solution._repr_markdown_()


def test_exercise_set_reaches_exercises_by_name_and_lists_them():
    exercises = ExerciseSet("Demo", [make_exercise()])
    assert exercises.four.check(4).correct
    assert len(exercises) == 1 and "four" in dir(exercises)
    assert repr(exercises) == "Demo: 1 exercises\n  ex.four: Find four"
    with pytest.raises(AttributeError, match="four"):
        exercises.five  # noqa: B018 - the attribute access is the test


def test_helpers():
    assert as_number(3) == 3.0
    assert as_number("3") == as_number(" 3 ") == 3.0  # a number typed in quotes is the number
    with pytest.raises(Wrong, match="answer must be a number"):
        as_number([3])
    assert close_to(3.9999998, 4) and not close_to(3.9, 4)
    assert Feedback(Status.CORRECT, "") == correct("")
    assert incorrect("x").status is Status.INCORRECT and not_attempted().status is Status.NOT_ATTEMPTED


def test_toolkit_is_pure_python():
    import subprocess

    code = "import widgets.exercises.toolkit, sys; print('torch' in sys.modules, 'matplotlib' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]


def test_numbers_from_values_lists_and_arrays():
    assert as_numbers(2) == [2.0] and as_numbers([1, (2, 3)]) == [1.0, 2.0, 3.0]

    class Array:  # anything with .tolist(), as tensors and numpy arrays have
        def tolist(self):
            return [[4.0, 4.5]]

    assert as_numbers(Array()) == [4.0, 4.5]
    with pytest.raises(Wrong, match=r"ratio\[1\] must be a number"):
        as_numbers([1, "x"], "ratio")


def test_diagnose_picks_the_typical_message():
    typical = {1.0: "still divided", 0.25: "upside down"}
    assert diagnose(0.2500001, typical, "other").message == "upside down"
    assert diagnose(7, typical, "other").message == "other"


def test_a_code_exercise_asks_for_the_function_itself_named_like_the_worked_answer():
    def answer_four():
        return 4

    exercise = Exercise("four", "Find four", "?", lambda f: correct(), ["hint"], answer_four)
    assert exercise.check(answer_four).correct
    assert "pass the function itself, `answer_four` (no parentheses), not int 4" in exercise.check(4).message
    named = Exercise("four", "Find four", "?", lambda f: correct(), ["hint"], answer_four, function="my_four")
    assert "`my_four`" in named.check(4).message
    assert make_exercise().check(5).message == "5 is not four."  # a text solution takes any answer


def test_a_checker_may_raise_wrong_and_closeness_goes_entry_by_entry():
    def checker(answer):
        b, k = two_numbers(answer, "(b, K)")
        if b * k != 8:
            raise Wrong("b x K must be 8")
        return correct()

    exercise = Exercise("plan", "Plan", "?", checker, ["hint"], "b, K = 2, 4")
    assert exercise.check((2, 4)).correct
    assert exercise.check((2, 3)).message == "b x K must be 8"
    assert exercise.check([1, 2, 3]).message == "give two numbers, (b, K); got 3"
    assert close_to([1.0, 2.0000001], (1, 2)) and not close_to([1.0], (1, 2)) and not close_to([1, 3], [1, 2])


def test_a_worked_function_is_shown_by_its_source():
    def answer_four():
        return 4

    exercise = Exercise("four", "Find four", "?", _is_four, ["hint"], answer_four)
    assert exercise.solution(anyway=True).code == "def answer_four():\n    return 4"


# --- solutions after an attempt, cells out of order, answers handed back -------------------

def test_the_solution_waits_for_an_attempt_and_says_how_to_see_it_anyway():
    ex = make_exercise()
    withheld = ex.solution()
    assert not hasattr(withheld, "code")
    assert "ex.four.check(" in repr(withheld) and "ex.four.solution(anyway=True)" in repr(withheld)
    assert ex.solution(anyway=True).code == "answer = 4"  # a notebook can still show it on purpose
    ex.check(...)  # the placeholder is not an attempt
    assert not hasattr(ex.solution(), "code")
    ex.check(5)
    assert ex.attempted and ex.solution().code == "answer = 4"


def test_a_right_answer_counts_as_an_attempt_too():
    ex = make_exercise()
    ex.check(4)
    assert ex.solution().code == "answer = 4"


def _calls_an_undefined_helper(x):
    return helper_from_an_earlier_cell(x)  # noqa: F821 - the cell that defines it has not run


def test_a_name_an_earlier_cell_defines_says_what_to_run_first():
    ex = Exercise("f", "Find f", "?", lambda f: correct() if f(4) == 4 else incorrect("no"), ["hint"], "f = abs")
    feedback = ex.check(_calls_an_undefined_helper)
    assert feedback.status is Status.RUN_EARLIER_CELLS
    assert "`helper_from_an_earlier_cell`" in feedback.message and "Run All Above" in feedback.message
    assert repr(feedback).startswith("Find f: Cannot check yet.")
    assert not ex.attempted  # not an attempt: the solution still waits


def reference_four(x):
    """The package's worked answer (in this test: a stand-in)."""
    doubled = x + x
    return doubled // 2


def _checker_of_four(f):
    return correct("ok") if f(4) == 4 and f(6) == 6 else incorrect("no")


def _four_exercise():
    return Exercise("id", "Identity", "?", _checker_of_four, ["hint"], reference_four)


def test_an_answer_is_judged_on_what_it_computes():
    def reference_four(x):  # pasted from the solution shown: compiled in the learner's cell
        doubled = x + x
        return doubled // 2
    assert _four_exercise().check(reference_four).correct


def test_an_answer_written_in_ones_own_words_passes():
    def mine(value):
        return value
    assert _four_exercise().check(mine).correct
    assert _four_exercise().check(lambda x: x).correct


def test_a_check_runs_under_a_known_torch_state_and_gives_the_learners_back():
    import torch

    seen = []

    def checker(answer):
        seen.append((torch.is_grad_enabled(), torch.get_default_dtype()))
        raise RuntimeError("the learner's function failed")  # the state comes back on error too

    exercise = Exercise("state", "State", "Any answer.", checker, ["A hint."], "answer = 1", "Any.")
    dtype = torch.get_default_dtype()
    torch.set_default_dtype(torch.float16)
    try:
        with torch.no_grad():
            assert exercise.check(1).status is Status.INCORRECT
            assert not torch.is_grad_enabled() and torch.get_default_dtype() == torch.float16
    finally:
        torch.set_default_dtype(dtype)
    assert seen == [(True, torch.float32)]


def test_a_set_lists_kinds_only_when_every_exercise_has_one():
    def ask(kind=None):
        return Exercise(kind or "none", "Q", "?", lambda a: correct(), ["h"], "a = 1", kind=kind)
    assert "you" in ExerciseSet("S", [ask("predict"), ask("code")])._repr_markdown_()
    assert "write code" in repr(ExerciseSet("S", [ask("predict"), ask("code")]))
    assert "you" not in ExerciseSet("S", [ask("predict"), ask()])._repr_markdown_()
