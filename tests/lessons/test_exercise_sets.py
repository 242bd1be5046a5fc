"""Every lesson's exercise sets, from the lesson's surface: each builds an ExerciseSet whose placeholders
are not attempted; each developer worked answer is right by its own checker (not handed back:
`_checker` directly) and is the solution shown after an attempt."""
import importlib
import pkgutil

import pytest

import widgets.lessons
from widgets.exercises.toolkit import KINDS, ExerciseSet, Status
from widgets.lessons import developer_1, developer_2, developer_3

LESSONS = sorted(m.name for m in pkgutil.iter_modules(widgets.lessons.__path__))
SETS = [(lesson, name) for lesson in LESSONS for name in dir(importlib.import_module(f"widgets.lessons.{lesson}"))
        if name.endswith("_exercises")]


def test_every_lesson_with_exercises_offers_its_set():
    assert {lesson for lesson, _ in SETS} == {lesson for lesson in LESSONS if lesson != "start_here"} - {"beginner_2", "developer_4"}


@pytest.mark.parametrize("lesson, name", SETS)
def test_every_set_is_built_from_the_surface(lesson, name):
    assert isinstance(getattr(importlib.import_module(f"widgets.lessons.{lesson}"), name)(), ExerciseSet)


@pytest.mark.parametrize("lesson, name", SETS)
def test_every_exercise_has_a_hint_and_a_known_kind(lesson, name):
    for exercise in getattr(importlib.import_module(f"widgets.lessons.{lesson}"), name)():
        assert exercise.hints and exercise.kind in (None, *KINDS), exercise.name


@pytest.mark.parametrize("make", [developer_1.proof_exercises, developer_2.loop_exercises, developer_3.gallery_exercises],
                         ids=["proof", "loop", "gallery"])
def test_every_exercise_reports_the_placeholder_as_not_attempted_and_withholds_the_solution(make):
    for exercise in make():
        assert exercise.check(...).status is Status.NOT_ATTEMPTED
        assert exercise.hint().text and len(exercise.hints) >= 2
        assert not hasattr(exercise.solution(), "code") and exercise.solution(anyway=True).code


@pytest.mark.parametrize("module, make, name, worked", [
    ("developer_1", "proof_exercises", "impersonate_16", "accumulate_16"),
    ("developer_2", "loop_exercises", "boundary", "is_boundary"),
    ("developer_2", "loop_exercises", "update_loss", "update_loss"),
    ("developer_3", "gallery_exercises", "my_loop", "my_loop"),
])
def test_each_worked_answer_is_right_and_is_the_solution_shown(module, make, name, worked):
    exercises = importlib.import_module(f"widgets.lessons.{module}.exercises")
    function = getattr(exercises, worked)
    exercise = getattr(getattr(exercises, make)(), name)
    assert exercise.check(function).correct
    assert exercise.solution().code.startswith(f"def {worked}(")
