"""`widgets.exercises.developer` gathers the three notebooks' sets: every placeholder is not attempted,
every worked answer is right by its own checker (not handed back: `_checker` directly) and is the
solution shown after an attempt."""
import pytest

from widgets.exercises import developer as developer_exercises
from widgets.exercises.developer import gallery_exercises, loop_exercises, proof_exercises
from widgets.exercises.toolkit import Status


@pytest.mark.parametrize("make", [proof_exercises, loop_exercises, gallery_exercises], ids=["proof", "loop", "gallery"])
def test_every_exercise_reports_the_placeholder_as_not_attempted_and_withholds_the_solution(make):
    for exercise in make():
        assert exercise.check(...).status is Status.NOT_ATTEMPTED
        assert exercise.hint(1).text and len(exercise.hints) >= 2
        assert not hasattr(exercise.solution(), "code") and exercise.solution(anyway=True).code


@pytest.mark.parametrize("make, name, worked", [
    (proof_exercises, "impersonate_16", "accumulate_16"),
    (loop_exercises, "boundary", "is_boundary"),
    (loop_exercises, "update_loss", "update_loss"),
    (gallery_exercises, "my_loop", "my_loop"),
])
def test_each_worked_answer_is_right_and_is_the_solution_shown(make, name, worked):
    function = getattr(developer_exercises, worked)
    exercise = getattr(make(), name)
    assert exercise._checker(function).correct  # right by the checker itself
    assert exercise.check(function).status is Status.INCORRECT  # but not accepted as the learner's answer
    assert exercise.solution().code.startswith(f"def {worked}(")  # that check was an attempt


def test_every_exercise_set_is_importable_from_the_folder():
    import widgets.exercises as folder
    from widgets.exercises.toolkit import ExerciseSet

    for name in folder.__all__:
        assert isinstance(getattr(folder, name)(), ExerciseSet), name
