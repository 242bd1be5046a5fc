"""`widgets.exercises.developer` gathers the three notebooks' sets: every placeholder is not attempted,
every worked answer passes its own checker and is the solution shown."""
import pytest

from widgets.exercises import developer as developer_exercises
from widgets.exercises.developer import gallery_exercises, loop_exercises, proof_exercises
from widgets.exercises.toolkit import Status

PROOF, LOOP, GALLERY = proof_exercises(), loop_exercises(), gallery_exercises()


@pytest.mark.parametrize("exercises", [PROOF, LOOP, GALLERY], ids=["proof", "loop", "gallery"])
def test_every_exercise_reports_the_placeholder_as_not_attempted(exercises):
    for exercise in exercises:
        assert exercise.check(...).status is Status.NOT_ATTEMPTED
        assert exercise.hint(1).text and exercise.solution().code


@pytest.mark.parametrize("exercises, name, worked", [
    (PROOF, "impersonate_16", "accumulate_16"),
    (LOOP, "boundary", "is_boundary"),
    (LOOP, "update_loss", "update_loss"),
    (GALLERY, "my_loop", "my_loop"),
])
def test_each_worked_answer_passes_and_is_the_solution_shown(exercises, name, worked):
    function = getattr(developer_exercises, worked)
    exercise = getattr(exercises, name)
    assert exercise.check(function).correct
    assert exercise.solution().code.startswith(f"def {worked}(")
