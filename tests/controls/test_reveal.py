"""`with guess.reveal():` runs its body at once but shows its output only once the guess is committed; after the
commit it prints as any cell does; a page without a kernel reads the waiting line with the output folded under it."""
import pytest

from widgets.controls.prediction import make_prediction
from widgets.controls.reveal import WAITING, WORKED_WAITING, HeldOutput, worked_answer


def guess_box():
    return make_prediction("What will knob.grad hold?", answer=6)


def held_in(widget) -> HeldOutput:
    (release,) = widget._on_commit
    return release.__self__


def test_the_body_runs_at_once_and_the_cell_shows_only_the_waiting_line(capsys):
    widget, ran = guess_box(), []
    with widget.reveal():
        ran.append(1)
        print("tensor(6.)")
    assert ran == [1]  # Run All leaves every later cell the state it expects
    assert capsys.readouterr().out == WAITING + "\n"  # outside IPython, display() prints the repr
    held = held_in(widget)
    assert held.outputs[0]["data"]["text/plain"] == WAITING and not held.released
    assert "6" not in str(held.outputs)


def test_committing_the_guess_shows_the_held_output_in_place_of_the_waiting_line(capsys):
    widget = guess_box()
    with widget.reveal():
        print("tensor(6.)")
    held = held_in(widget)
    widget.entry.value = "3"
    widget.entry.disabled = True  # what a click on Commit does in the browser
    assert held.released and held.outputs == ({"output_type": "stream", "name": "stdout", "text": "tensor(6.)\n"},)


def test_a_guess_that_is_not_a_number_keeps_the_answer_waiting():
    widget = guess_box()
    with widget.reveal():
        print("tensor(6.)")
    assert widget.commit("six") is False and not held_in(widget).released


def test_run_after_the_commit_the_body_prints_as_any_cell(capsys):
    widget = guess_box()
    widget.commit("6")
    with widget.reveal():
        print("tensor(6.)")
    assert capsys.readouterr().out == "tensor(6.)\n" and widget._on_commit == []


def test_a_body_that_raises_shows_what_it_printed_then_the_error(capsys):
    widget = guess_box()
    with pytest.raises(KeyError):
        with widget.reveal():
            print("before the error")
            {}["knob"]
    assert capsys.readouterr().out == "before the error\n" and widget._on_commit == []


def test_without_a_kernel_the_waiting_line_then_the_output_folded_and_text_plain_for_nbval():
    widget = guess_box()
    with widget.reveal():
        print("pile without the division: -45.0")
    data = held_in(widget)._repr_mimebundle_()
    data = data[0] if isinstance(data, tuple) else data
    assert data["text/plain"] == WAITING and "application/vnd.jupyter.widget-view+json" in data
    page = data["text/html"]
    assert page.index("<details>") < page.index("Commit your guess above first") < page.index("</summary>")
    assert page.index("</summary>") < page.index("-45.0")


def plan_exercise():
    from widgets.exercises.toolkit import Exercise, number_checker

    return Exercise("plan", "Choose b", "The largest b that fits.",
                    number_checker(8.0, {}, "{value:g} is not it.", "b = 8.", "b"), ["6 + 0.3 b <= 10"], "b = 8")


def test_a_worked_answer_waits_for_the_learners_own_check_not_its_own(capsys):
    exercise = plan_exercise()
    with worked_answer(exercise):
        print("fits: [1, 2, 4, 8]")
        print(exercise.check(8))  # the worked answer proves itself: that check is not the learner's
    assert capsys.readouterr().out == WORKED_WAITING + "\n"
    (release,) = exercise._on_verdict
    held = release.__self__
    assert not held.released and exercise.check(...).status.name == "NOT_ATTEMPTED" and not held.released
    exercise.check(16)  # the learner's own answer, wrong: the worked answer may show now
    assert held.released and "fits: [1, 2, 4, 8]" in held.outputs[0]["text"] and exercise._on_verdict == []
    with worked_answer(exercise):  # run again after an attempt: printed as any cell
        print("fits")
    assert capsys.readouterr().out == "fits\n"
