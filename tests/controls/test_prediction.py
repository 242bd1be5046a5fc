"""The guess-then-see widget: nothing is shown before a guess is committed, the reveal says right or
wrong against the computed answer, bad input leaves a message and the widget working, and the saved
forms (text/plain for nbval, text/html without a kernel) are deterministic."""
import pytest

from widgets.controls.prediction import PredictionWidget, make_prediction


def press_commit(widget):
    """What a click on Commit does in the browser: the button goes down and the browser's link locks the entry."""
    widget.button.value = True
    widget.entry.disabled = True


def number_widget(**kwargs):
    return make_prediction("How many trips carry 24 bricks, 6 at a time?", answer=4, **kwargs)


def choice_widget(answer="no wall yet"):
    return make_prediction("After trip 2 of 4, what stands?", answer=answer,
                           choices=["a quarter of the wall", "half the wall", "no wall yet"],
                           explanation="The wall waits for the last trip.",
                           wrong_guesses={"half the wall": "Half the bricks are up, but in the pile."})


def test_builder_returns_a_widget_that_reveals_nothing_before_a_guess():
    widget = number_widget()
    assert isinstance(widget, PredictionWidget)
    assert widget.guess is None and widget.correct is None and widget.verdict.value == ""
    assert not widget.entry.disabled and not widget.button.disabled


def test_a_right_number_is_locked_in_and_the_reveal_says_right():
    widget = number_widget(explanation="24 / 6 = 4.")
    widget.entry.value = " 4 "
    press_commit(widget)  # the learner's path: type, then press the button
    assert widget.guess == 4.0 and widget.correct is True and widget.answer_shown == 4.0
    assert "Right." in widget.verdict.value and "the answer is <b>4</b>" in widget.verdict.value
    assert "24 / 6 = 4." in widget.verdict.value
    assert widget.entry.disabled and widget.button.disabled


def test_a_wrong_number_is_told_so_and_cannot_be_changed_after_the_reveal():
    widget = number_widget(wrong_guesses={144: "144 = 24 x 6: divide instead."})
    assert widget.commit("144")
    assert widget.correct is False and "Not this time." in widget.verdict.value
    assert "You guessed <b>144</b>" in widget.verdict.value and "divide instead" in widget.verdict.value
    assert widget.commit("4") is False and widget.guess == 144.0  # locked: no second guess after peeking
    assert "already locked in" in widget.message.value


@pytest.mark.parametrize("typed, words", [
    ("four", "'four' is not a number"),
    ("", "nothing typed yet"),
    ("1,5", "no commas"),
    ("inf", "not a finite number"),
    ("nan", "not a finite number"),
])
def test_bad_input_names_what_is_allowed_and_the_widget_keeps_working(typed, words):
    widget = number_widget()
    widget.entry.value = typed
    press_commit(widget)
    assert words in widget.message.value and "plain number" in widget.message.value
    assert widget.guess is None and widget.verdict.value == "" and not widget.button.disabled
    widget.entry.value = "−4"  # a typographic minus is read as a minus
    press_commit(widget)
    assert widget.message.value == "" and widget.guess == -4.0 and widget.correct is False


def test_numbers_within_the_relative_tolerance_count_as_right():
    assert make_prediction("q?", answer=-22.5).commit("-22.50001")
    widget = make_prediction("q?", answer=-22.5, rel_tolerance=0.1)
    widget.commit(-21)
    assert widget.correct is True


def test_choices_need_one_picked_and_the_verdict_explains_a_typical_wrong_pick():
    widget = choice_widget()
    assert widget.commit() is False and "nothing picked yet" in widget.message.value
    assert "'no wall yet'" in widget.message.value  # names what is allowed
    assert widget.commit("a whole wall") is False and "not one of the choices" in widget.message.value
    widget.entry.value = "half the wall"
    assert widget.commit()
    assert widget.correct is False and "in the pile" in widget.verdict.value
    assert "The wall waits for the last trip." in widget.verdict.value


def test_an_answer_function_is_called_only_at_the_reveal_and_a_failure_leaves_the_guess_open():
    calls = []

    def answer():
        calls.append(1)
        if len(calls) == 1:
            raise NameError("name 'knob' is not defined")
        return 6.0

    widget = make_prediction("What will knob.grad print?", answer=answer)
    assert calls == []
    assert widget.commit("6") is False
    assert "knob" in widget.errors.outputs[0]["text"] and widget.guess is None and not widget.button.disabled
    assert widget.commit("6") and widget.correct is True and widget.errors.outputs == ()


def test_a_tensor_answer_is_read_as_a_number():
    torch = pytest.importorskip("torch")
    widget = make_prediction("q?", answer=lambda: torch.tensor(6.0))
    assert widget.commit("6") and widget.answer_shown == 6.0


def test_text_plain_is_deterministic_and_keeps_the_answer_hidden():
    bundles = [choice_widget()._repr_mimebundle_(), choice_widget()._repr_mimebundle_()]
    data = [b[0] if isinstance(b, tuple) else b for b in bundles]
    assert data[0]["text/plain"] == data[1]["text/plain"] and data[0]["text/html"] == data[1]["text/html"]
    assert data[0]["text/plain"].startswith("Prediction: After trip 2 of 4, what stands? (pick one of")
    hidden = make_prediction("How many bricks in 3 trips of 5?", answer=15)
    assert repr(hidden) == ("Prediction: How many bricks in 3 trips of 5? "
                            "(type a number, then commit; the answer is revealed after.)")
    assert "application/vnd.jupyter.widget-view+json" in data[0]


def test_without_a_kernel_the_answer_is_folded_away_under_the_question():
    data = choice_widget()._repr_mimebundle_()
    data = data[0] if isinstance(data, tuple) else data
    page = data["text/html"]
    assert page.index("After trip 2 of 4") < page.index("<details>") < page.index("no wall yet</b>")
    assert "<li>half the wall</li>" in page


def test_the_static_form_survives_an_answer_that_cannot_be_computed_yet():
    def answer():
        raise NameError("knob")

    data = make_prediction("q?", answer=answer)._repr_mimebundle_()
    data = data[0] if isinstance(data, tuple) else data
    assert "<details>" not in data["text/html"] and "q?" in data["text/html"]


@pytest.mark.parametrize("kwargs, word", [
    (dict(question="", answer=1), "question"),
    (dict(question="q?", answer="four"), "answer must be a finite number"),
    (dict(question="q?", answer=float("nan")), "answer must be a finite number"),
    (dict(question="q?", answer="c", choices=["a", "b"]), "answer must be one of the choices"),
    (dict(question="q?", answer="a", choices=["a"]), "at least 2"),
    (dict(question="q?", answer="a", choices="ab"), "list of at least 2"),
    (dict(question="q?", answer="a", choices=["a", "a"]), "differ"),
    (dict(question="q?", answer=1, rel_tolerance=2), "rel_tolerance"),
])
def test_bad_arguments_name_the_parameter(kwargs, word):
    with pytest.raises(ValueError, match=word):
        make_prediction(**kwargs)


def test_an_answer_function_that_returns_something_outside_the_choices_is_reported():
    widget = make_prediction("q?", answer=lambda: "c", choices=["a", "b"])
    assert widget.commit("a") is False and "not one of the choices" in widget.errors.outputs[0]["text"]


def test_a_click_commits_what_the_entry_holds_when_its_lock_arrives():
    # A browser holds the entry's last keystrokes while an earlier one is unanswered, and sends a click at once;
    # so the click only locks the entry, in the browser, and the lock travels after the keystrokes in one message.
    widget = number_widget()
    link = widget._click_locks_entry
    assert (link.source, link.target) == ((widget.button, "value"), (widget.entry, "disabled"))
    widget.entry.value = "1"  # the first keystroke, sent at once
    widget.button.value = True  # the click, sent at once: no commit from the button itself
    assert widget.guess is None
    widget.entry.set_state({"value": "4", "disabled": True})  # the held keystrokes with the lock, as one message
    assert widget.guess == 4.0 and widget.correct is True and widget.button.disabled


def test_a_click_without_a_number_unlocks_the_box_and_says_why():
    widget = number_widget()
    widget.entry.value = "ten"
    press_commit(widget)
    assert widget.guess is None and "'ten' is not a number" in widget.message.value
    assert not widget.entry.disabled and not widget.button.value and not widget.button.disabled
    widget.entry.value = "0"  # corrected, then a click alone
    press_commit(widget)
    assert widget.guess == 0.0 and widget.correct is False and widget.message.value == ""


def test_the_beginner_predictions_build_and_reveal():
    from widgets.lessons.beginner_1.exercises import beginner_predictions

    for name, kwargs in beginner_predictions().items():
        widget = make_prediction(**kwargs)
        assert widget.commit(str(widget.answer())) and widget.correct, name
        wrong = make_prediction(**kwargs)
        guess, why = next(iter(kwargs["wrong_guesses"].items()))
        assert wrong.commit(guess) and wrong.correct is False and why.split(":")[0] in wrong.verdict.value, name
