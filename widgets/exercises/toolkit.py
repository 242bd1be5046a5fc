"""Learntools-style exercises: `ex.ratio.check(my_ratio)`, `.hint()` one at a time, `.solution()` after an attempt."""
from __future__ import annotations

import contextlib
import enum
import html
import inspect
import math
import numbers
import sys
import textwrap
from dataclasses import dataclass, replace
from typing import Callable, Iterable, Sequence

from widgets.lab import progress


class Status(enum.Enum):
    """The outcomes of `Exercise.check`."""

    CORRECT = "Correct"
    INCORRECT = "Incorrect"
    NOT_ATTEMPTED = "Not attempted"
    RUN_EARLIER_CELLS = "Cannot check yet"  # the answer needs a name an earlier cell defines


# The mark and colour of each status: Okabe-Ito's bluish green, vermillion and blue at 4.5:1 on white.
_SHOWN = {Status.CORRECT: ("✓", "#008762"), Status.INCORRECT: ("✗", "#C35600"),
          Status.NOT_ATTEMPTED: ("…", "#0072B2"), Status.RUN_EARLIER_CELLS: ("↑", "#0072B2")}
PLACEHOLDER_MESSAGE = "replace the `...` with your answer, then run the cell again"
# What an exercise asks of the learner: foresee what a picture or a model will do, work a number
# out, or write code. The beginner tier keeps arithmetic to at most two questions a notebook.
KINDS = {"predict": "predict", "compute": "work it out", "code": "write code"}


@dataclass(frozen=True)
class Feedback:
    """The verdict on one answer: its status and, in plain words, what is right or wrong."""

    status: Status
    message: str
    exercise: str = ""

    @property
    def correct(self) -> bool:
        return self.status is Status.CORRECT

    def _sentence(self) -> str:
        return self.message[:1].upper() + self.message[1:]

    def __repr__(self) -> str:
        head = f"{self.exercise}: " if self.exercise else ""
        return f"{head}{self.status.value}. {self._sentence()}".rstrip()

    def _repr_markdown_(self) -> str:
        head = f"{html.escape(self.exercise)}: " if self.exercise else ""
        mark, colour = _SHOWN[self.status]
        return f'{head}<span style="color:{colour}">**{mark} {self.status.value}.**</span> {self._sentence()}'.rstrip()


def correct(message: str = "") -> Feedback:
    """What a checker returns for a right answer (the message may add why it is right)."""
    return Feedback(Status.CORRECT, message)


def incorrect(message: str) -> Feedback:
    """What a checker returns for a wrong answer: `message` says what is wrong."""
    return Feedback(Status.INCORRECT, message)


def not_attempted(message: str = PLACEHOLDER_MESSAGE) -> Feedback:
    """What a checker returns when the answer is still the placeholder."""
    return Feedback(Status.NOT_ATTEMPTED, message)


@dataclass(frozen=True)
class Hint:
    """Hint `number` of `total` for one exercise."""

    exercise: str
    number: int
    total: int
    text: str

    def __repr__(self) -> str:
        return f"{self.exercise}: hint {self.number} of {self.total}. {self.text}"

    def _repr_markdown_(self) -> str:
        more = "" if self.number == self.total else " (ask again for the next one)"
        return f"{html.escape(self.exercise)}: **hint {self.number} of {self.total}**{more}. {self.text}"


@dataclass(frozen=True)
class Solution:
    """A worked answer: a sentence or two of explanation and the code (or value) itself."""

    exercise: str
    explanation: str
    code: str

    def __repr__(self) -> str:
        return f"{self.exercise}: solution. {self.explanation}\n{self.code}"

    def _repr_markdown_(self) -> str:
        return f"{html.escape(self.exercise)}: **solution.** {self.explanation}\n\n```python\n{self.code}\n```"


@dataclass(frozen=True)
class SolutionWithheld:
    """What `solution()` gives before any attempt: how to attempt, and how to see the solution anyway."""

    exercise: str
    name: str

    def _text(self) -> str:
        return (f"the solution is shown after a first attempt: check your answer with `ex.{self.name}.check(...)` "
                f"(hints, one at a time: `ex.{self.name}.hint()`). To see it without trying: "
                f"`ex.{self.name}.solution(anyway=True)`.")

    def __repr__(self) -> str:
        return f"{self.exercise}: {self._text()}"

    def _repr_markdown_(self) -> str:
        return f"{html.escape(self.exercise)}: {self._text()}"


def is_placeholder(value: object) -> bool:
    """Is `value` the blank a learner has not filled in yet (`...` or None)?"""
    return value is None or value is Ellipsis


class Wrong(Exception):
    """Raised inside a checker: the answer is Incorrect, for the reason the message gives."""


def _known_torch_state() -> contextlib.AbstractContextManager:
    """`known_torch_state` once torch is loaded (a learner who never imported it cannot have changed it)."""
    if "torch" not in sys.modules:
        return contextlib.nullcontext()
    from widgets.core.training import known_torch_state
    return known_torch_state(threads=None)


class Exercise:
    """One question with its checker (`checker(*answers)` returns a `Feedback`), graded hints and solution: code as
    text, or a worked function whose source is shown, the answer then being a function too (named `function`)."""

    def __init__(self, name: str, title: str, prompt: str, checker: Callable[..., Feedback], hints: Sequence[str],
                 solution: str | Callable, explanation: str = "", kind: str | None = None, function: str = ""):
        self.name, self.title, self.prompt, self.kind = name, title, prompt, kind
        self._checker = checker
        self.function = function or getattr(solution, "__name__", "")
        self.hints = tuple(hints)
        # a worked function is shown by its own source, so the solution shown is the code that is tested
        code = inspect.getsource(solution) if callable(solution) else solution
        self._solution = Solution(title, explanation, textwrap.dedent(code).strip())
        self.hints_shown = 0
        self.attempted = False  # set by the first check that gets a verdict (Correct or Incorrect)
        self._on_verdict: list[Callable[[], None]] = []  # called once at the next verdict (`when_checked`)
        self.set_title = ""  # the notebook's set, once an ExerciseSet holds it: where progress is kept

    def check(self, *answers: object) -> Feedback:
        """Judge the learner's answer(s): Correct, Incorrect (saying what is wrong) or Not attempted."""
        if not answers or any(is_placeholder(a) for a in answers):
            feedback = not_attempted()
        else:
            feedback = self._judge(answers)
        if feedback.status in (Status.CORRECT, Status.INCORRECT):
            self.attempted = True
            waiting, self._on_verdict = self._on_verdict, []
            for call in waiting:
                call()
        if self.set_title and feedback.status is not Status.NOT_ATTEMPTED:  # widgets.progress() reads it
            progress.note_check(self.set_title, self.name, feedback.status is Status.CORRECT, self.title)
        return replace(feedback, exercise=self.title)

    def _judge(self, answers: tuple) -> Feedback:
        try:
            if self.function and not callable(answers[0]):
                raise Wrong(f"pass the function itself, `{self.function}` (no parentheses), "
                            f"not {type(answers[0]).__name__} {answers[0]!r:.60}")
            # a learner's earlier set_grad_enabled(False) or float16 default must not flip a verdict
            with _known_torch_state():
                return self._checker(*answers)
        except Wrong as wrong:
            return incorrect(str(wrong))
        except NameError as error:  # a name an earlier cell defines: say what to run first
            name = error.name or str(error)
            return Feedback(Status.RUN_EARLIER_CELLS, f"your answer uses `{name}`, which is not defined in this "
                            "kernel yet: run the cell that defines it first (Run > Run All Above Selected Cell runs "
                            f"every cell above this one), then this one again. If no cell defines `{name}`, check its "
                            "spelling")
        except KeyboardInterrupt:  # the learner's own interrupt stops the cell
            raise
        except BaseException as error:  # noqa: BLE001 - the learner's function failed: say so, do not crash the cell
            return incorrect(f"checking your answer raised {type(error).__name__}: {error}")

    def when_checked(self, call: Callable[[], None]) -> None:
        """Call `call` once, at the next check that gets a verdict (a worked answer held until the learner's own)."""
        self._on_verdict.append(call)

    def hint(self) -> Hint:
        """The next hint: they get more specific one at a time, and the last one stays."""
        self.hints_shown = min(self.hints_shown + 1, len(self.hints))
        return Hint(self.title, self.hints_shown, len(self.hints), self.hints[self.hints_shown - 1])

    def solution(self, anyway: bool = False) -> Solution | SolutionWithheld:
        """The worked answer, once the exercise has been attempted (or with `anyway=True`)."""
        return self._solution if self.attempted or anyway else SolutionWithheld(self.title, self.name)

    def _heading(self) -> str:
        return self.title if self.title[-1:] in ".?!" else self.title + "."

    def __repr__(self) -> str:
        return f"{self._heading()} {self.prompt}"

    def _repr_markdown_(self) -> str:
        return f"**{html.escape(self._heading())}** {self.prompt}"


class ExerciseSet:
    """The exercises of one notebook, reached as attributes: `ex = ...; ex.ratio.check(4.0)`."""

    def __init__(self, title: str, exercises: Iterable[Exercise]):
        self.title = title
        self._exercises = {e.name: e for e in exercises}
        for exercise in self._exercises.values():
            exercise.set_title = title
        letters = frozenset(letter for e in self for letter in getattr(e._checker, "letters", ()))
        shell = getattr(sys.modules.get("IPython"), "get_ipython", lambda: None)()
        if letters and shell is not None:  # in a notebook: `answer = B` is told to quote the letter
            shell.set_custom_exc((NameError,), _tell_to_quote(letters))
        progress.note_exercises(title, [(e.name, e.title) for e in self._exercises.values()])  # best effort

    def __getattr__(self, name: str) -> Exercise:
        exercises = self.__dict__.get("_exercises", {})
        if name in exercises:
            return exercises[name]
        raise AttributeError(f"no exercise named {name!r}; this set has {sorted(exercises)}")

    def __iter__(self):
        return iter(self._exercises.values())

    def __len__(self) -> int:
        return len(self._exercises)

    def __dir__(self):
        return [*super().__dir__(), *self._exercises]

    def _kinds(self) -> bool:
        return all(e.kind for e in self)

    def __repr__(self) -> str:
        lines = [f"{self.title}: {len(self)} exercises"]
        lines += [f"  ex.{e.name}: {e.title}" + (f" ({KINDS[e.kind]})" if self._kinds() else "") for e in self]
        return "\n".join(lines)

    def _repr_markdown_(self) -> str:
        if self._kinds():
            rows = "\n".join(f"| `ex.{e.name}` | {html.escape(e.title)} | {KINDS[e.kind]} |" for e in self)
            head = "| call | exercise | you |\n|---|---|---|"
        else:
            rows = "\n".join(f"| `ex.{e.name}` | {html.escape(e.title)} |" for e in self)
            head = "| call | exercise |\n|---|---|"
        return f"**{html.escape(self.title)}**: {len(self)} exercises\n\n{head}\n{rows}"


def as_number(value: object, name: str = "answer") -> float:
    """A learner's number as a float: a one-element tensor (`.item()`) and a number typed in quotes ('4') too;
    anything else is Wrong, saying a number is needed."""
    if hasattr(value, "item") and callable(value.item) and getattr(value, "numel", lambda: 1)() == 1:
        value = value.item()
    if isinstance(value, str):
        try:
            return float(value.strip().replace("−", "-"))  # '4': the number meant, quotes or not
        except ValueError:
            raise Wrong(f"{name} must be a number, typed without quotes (such as 4 or 0.25), got {value!r}") from None
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise Wrong(f"{name} must be a number, got {value!r} ({type(value).__name__})")
    return float(value)


def close_to(value: float | Sequence[float], target: float | Sequence[float], rel: float = 1e-3) -> bool:
    """Equal up to a relative tolerance (a learner's 3.9999998 is the answer 4); sequences entry by entry."""
    if isinstance(target, Sequence):
        return len(value) == len(target) and all(close_to(v, t, rel) for v, t in zip(value, target))
    return math.isclose(value, target, rel_tol=rel, abs_tol=1e-9)


def as_numbers(answer: object, name: str = "answer") -> list[float]:
    """A number, a list of numbers or a tensor/array (anything with `.tolist()`), as a flat list of floats."""
    if hasattr(answer, "tolist") and not isinstance(answer, (int, float)):
        answer = answer.tolist()
    if not isinstance(answer, (list, tuple)):
        return [as_number(answer, name)]
    values: list[float] = []
    for i, v in enumerate(answer):
        values += as_numbers(v, f"{name}[{i}]") if isinstance(v, (list, tuple)) else [as_number(v, f"{name}[{i}]")]
    return values


def two_numbers(answer: object, what: str) -> list[float]:
    """The learner's two numbers `what` names, e.g. "(b, K)"; else Wrong, saying how many they gave."""
    values = as_numbers(answer, "answer")
    if len(values) != 2:
        raise Wrong(f"give two numbers, {what}; got {len(values)}")
    return values


def diagnose(value: float | Sequence[float], typical: dict, fallback: str) -> Feedback:
    """Incorrect, with the message of the typical wrong value `value` is close to, else `fallback`."""
    for wrong, message in typical.items():
        if close_to(value, wrong):
            return incorrect(message)
    return incorrect(fallback)


def number_checker(target: float, typical: dict[float, str], fallback: str, right: str, name: str):
    """A checker for one number: Correct near `target`, else the typical mistake's message, else `fallback`."""
    def check(answer: object) -> Feedback:
        value = as_number(answer, name)
        if close_to(value, target):
            return correct(right)
        return diagnose(value, typical, fallback.format(value=value))
    return check


def choice_checker(right: str, wrong: dict[str, str], right_message: str):
    """A checker for one letter: Correct for `right`, else the misconception behind that letter. Its `letters` tell
    an `ExerciseSet` that a bare `B` typed for an answer should be told to take quotes."""
    letters = sorted({right, *wrong})

    def check(answer: object) -> Feedback:
        letter = answer.strip().upper() if isinstance(answer, str) else None
        if letter not in letters:
            return incorrect(f"answer with one of the letters {', '.join(repr(x) for x in letters)}, in quotes; "
                             f"got {answer!r}")
        return correct(right_message) if letter == right else incorrect(wrong[letter])
    check.letters = letters
    return check


@dataclass(frozen=True)
class QuotesNote:
    """Shown under the NameError of an answer typed as a bare letter (`answer = B`): the letter needs quotes."""

    letter: str

    def _text(self) -> str:
        return (f"Without quotes, {self.letter} is a name Python looks up, and nothing is called {self.letter}. "
                f"The answer is a letter: put it in quotes, answer = '{self.letter}', then run the cell again.")

    def __repr__(self) -> str:
        return self._text()

    def _repr_html_(self) -> str:
        # as a paragraph of its own, never inside the traceback's <pre>, which breaks lines mid-word
        return (f'<p style="white-space: normal; word-break: normal; overflow-wrap: break-word">'
                f"{html.escape(self._text(), quote=False)}</p>")


def _tell_to_quote(letters: frozenset[str]):
    """IPython's handler for a cell's NameError: the traceback as always, then, for a bare answer letter, `QuotesNote`."""
    def handler(shell, etype, value, tb, tb_offset=None):
        shell.showtraceback((etype, value, tb), tb_offset=tb_offset)
        name = getattr(value, "name", None)
        if isinstance(name, str) and name.upper() in letters and len(name) == 1:
            from IPython.display import display
            display(QuotesNote(name))
    return handler
