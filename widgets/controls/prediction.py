"""Guess, then see: the learner commits to a prediction, locked once committed, before the computed answer shows;
`with guess.reveal():` holds a later cell's output until then (widgets/controls/reveal.py).
Without a kernel the saved output shows the question and the answer folded away; `text/plain` is one line for nbval."""
from __future__ import annotations

import html
import math
from typing import Callable, ContextManager, Mapping, Sequence

import ipywidgets as W

from widgets.controls.compat import Displayed, set_tooltip
from widgets.controls.reveal import held_until
from widgets.draw.style import RIGHT_TEXT, WRONG_TEXT, errors_shown_in


def _escape(text: str) -> str:
    """Text for an HTML text node (quotes stay readable quotes: nothing here goes into an attribute)."""
    return html.escape(text, quote=False)


def _plain(value: object) -> str:
    """A number as a reader writes it (20, -22.5, 0.25); anything else as its text."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return str(value)


class PredictionWidget(Displayed, W.VBox):
    """Use `make_prediction`; `guess` stays None until `commit()` locks one in."""

    def __init__(self, question, answer, choices, explanation, wrong_guesses, rel_tolerance):  # checked by the builder
        self.question_text, self._answer, self.choices = question, answer, tuple(choices) if choices else None
        self.explanation, self.wrong_guesses, self.rel_tolerance = explanation, dict(wrong_guesses), rel_tolerance
        self.guess: object = None
        self.correct: bool | None = None
        self.answer_shown: object = None
        self._on_commit: list[Callable[[], None]] = []  # each held reveal's release
        self.question = W.HTML(f"<b>Predict first.</b> {_escape(question)}")
        if self.choices:
            self.entry = W.RadioButtons(options=self.choices, value=None, layout=W.Layout(width="auto"))
        else:
            # The description labels the box for a screen reader.
            self.entry = W.Text(description="your guess", placeholder="e.g. 12", continuous_update=True,
                                style={"description_width": "80px"}, layout=W.Layout(width="240px"))
        self.button = set_tooltip(W.ToggleButton(description="Commit my guess", button_style="primary"),
                                  "Lock in your guess; then the answer is shown")
        # The click locks the entry in the browser (a link the browser runs) and the kernel commits when the entry's
        # own model says it is locked. A browser holds a model's changes while its last one is unanswered and sends
        # them together after, but sends a button's click at once: a click read by the kernel could overtake the
        # last keystrokes (2 in 9 corrected guesses lost). Sent by the entry's model, the lock comes after them.
        self._click_locks_entry = W.jsdlink((self.button, "value"), (self.entry, "disabled"))
        self.entry.observe(self._locked_by_click, "disabled")
        self.message = W.HTML()
        self.verdict = W.HTML()
        self.errors = W.Output()
        super().__init__([self.question, W.HBox([self.entry, self.button]), self.message, self.verdict, self.errors])

    def _locked_by_click(self, change) -> None:
        if change["new"] and self.guess is None and not self.commit():
            self.entry.disabled = self.button.value = False  # not a guess yet: the message says why; try again

    def reveal(self) -> ContextManager[None]:
        """`with guess.reveal():` runs a cell's body now and holds its output until a guess is committed."""
        return held_until(self.guess is not None, self._on_commit.append)

    def answer(self) -> object:
        """The answer, computed now if it was given as a function."""
        value = self._answer() if callable(self._answer) else self._answer
        if self.choices and value not in self.choices:
            raise ValueError(f"the answer {value!r} is not one of the choices {list(self.choices)}")
        if not self.choices:
            value = float(value.item() if hasattr(value, "item") else value)
        return value

    def _read_guess(self, guess: object) -> object:
        """The guess as a number or one of the choices; a ValueError names what is allowed."""
        if self.choices:
            if guess not in self.choices:
                picked = "nothing picked yet" if guess is None else f"{guess!r} is not one of the choices"
                raise ValueError(f"{picked}: pick one of {', '.join(repr(c) for c in self.choices)}")
            return guess
        allowed = "type one plain number, such as 20, -3.5 or 0.25 (no units, no commas)"
        cleaned = str(guess).strip().replace("−", "-")
        if not cleaned:
            raise ValueError(f"nothing typed yet: {allowed}")
        try:
            value = float(cleaned)
        except ValueError:
            raise ValueError(f"{cleaned!r} is not a number: {allowed}") from None
        if not math.isfinite(value):
            raise ValueError(f"{cleaned!r} is not a finite number: {allowed}")
        return value

    def _same(self, guess: object, other: object) -> bool:
        """A pick equals a choice; a number is close to one within `rel_tolerance` (3.9999998 is 4)."""
        if self.choices:
            return guess == other
        return math.isclose(guess, float(other), rel_tol=self.rel_tolerance, abs_tol=1e-9)

    def commit(self, guess: object = None) -> bool:
        """Lock in `guess` (default: the entry's) and reveal the answer; a guess not allowed leaves a message."""
        if self.guess is not None:
            self.message.value = "<i>Your guess is already locked in.</i>"
            return False
        try:
            value = self._read_guess(self.entry.value if guess is None else guess)
        except ValueError as error:
            self.message.value = f"<span style='color:{WRONG_TEXT}'>{_escape(str(error))}</span>"
            return False
        self.message.value = ""
        answered = False
        with errors_shown_in(self.errors, "the answer"):
            answer = self.answer()
            answered = True
        if not answered:  # computing the answer failed: nothing is locked, the learner can try again
            return False
        right = self._same(value, answer)
        self.guess, self.correct, self.answer_shown = value, right, answer
        self.button.disabled = self.button.value = self.entry.disabled = True
        self.button.description = "Guess locked in"
        self.verdict.value = self._reveal_html(value, answer, right)
        for release in self._on_commit:
            release()
        return True

    def _reveal_html(self, value: object, answer: object, right: bool) -> str:
        verdict = "Right" if right else "Not this time"
        colour = RIGHT_TEXT if right else WRONG_TEXT
        lines = [f"<span style='color:{colour}'><b>{verdict}.</b></span> You guessed <b>{_escape(_plain(value))}</b>; "
                 f"the answer is <b>{_escape(_plain(answer))}</b>."]
        why = "" if right else next((why for wrong, why in self.wrong_guesses.items() if self._same(value, wrong)), "")
        lines += [_escape(text) for text in (why, self.explanation) if text]
        return "<p style='margin:0.3em 0'>" + " ".join(lines) + "</p>"

    def _static_html(self) -> str:
        """What a reader without a kernel sees: the question, the choices, the answer folded away."""
        parts = [f"<p><b>Predict first.</b> {_escape(self.question_text)}</p>"]
        if self.choices:
            parts.append("<ul>" + "".join(f"<li>{_escape(c)}</li>" for c in self.choices) + "</ul>")
        try:
            answer = _escape(_plain(self.answer()))
        except Exception:  # e.g. the answer needs a cell that has not run: show the question alone
            return "".join(parts)
        explanation = f" {_escape(self.explanation)}" if self.explanation else ""
        parts.append(f"<details><summary>Decide on your guess, then click to see the answer</summary>"
                     f"<p>The answer is <b>{answer}</b>.{explanation}</p></details>")
        return "".join(parts)

    def __repr__(self) -> str:
        kind = f"pick one of {list(self.choices)}" if self.choices else "type a number"
        return f"Prediction: {self.question_text} ({kind}, then commit; the answer is revealed after.)"

    def _repr_mimebundle_(self, **kwargs):
        """The live widget with a kernel; the question and a folded answer without one."""
        bundle = super()._repr_mimebundle_(**kwargs)
        data = bundle[0] if isinstance(bundle, tuple) else bundle
        data["text/plain"] = repr(self)
        data["text/html"] = self._static_html()
        return bundle


def make_prediction(
    question: str,
    answer: object | Callable[[], object],
    *,
    choices: Sequence[str] | None = None,
    explanation: str = "",
    wrong_guesses: Mapping[object, str] | None = None,
    rel_tolerance: float = 1e-3,
) -> PredictionWidget:
    """Build (not display) a guess-then-see widget; `answer` is a number, one of `choices`, or a cheap function
    computing it (called at the reveal and for the saved output); `wrong_guesses` says what a typical one means."""
    if not isinstance(question, str) or not question.strip():
        raise ValueError("question must be a non-empty string")
    if choices is not None:
        if isinstance(choices, str) or len(choices) < 2 or not all(isinstance(c, str) and c for c in choices):
            raise ValueError(f"choices must be a list of at least 2 non-empty strings, got {choices!r}")
        if len(set(choices)) != len(choices):
            raise ValueError(f"choices must differ from each other, got {list(choices)}")
        if not callable(answer) and answer not in choices:
            raise ValueError(f"answer must be one of the choices {list(choices)}, got {answer!r}")
    elif not callable(answer):
        if isinstance(answer, bool) or not isinstance(answer, (int, float)) or not math.isfinite(answer):
            raise ValueError(f"answer must be a finite number (or a function computing one), got {answer!r}")
    if isinstance(rel_tolerance, bool) or not isinstance(rel_tolerance, (int, float)) or not 0 <= rel_tolerance < 1:
        raise ValueError(f"rel_tolerance must be a number from 0 to below 1, got {rel_tolerance!r}")
    return PredictionWidget(question, answer, choices, explanation, wrong_guesses or {}, float(rel_tolerance))
