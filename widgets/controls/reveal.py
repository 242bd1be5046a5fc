"""An answer that waits for the learner: a cell's output held back until a guess is committed (or, with
`worked_answer`, until an exercise's answer has been checked).

    guess = make_prediction(...)     # one cell: the guess box
    guess
    with guess.reveal():             # the next cell: its body runs now, its output waits
        loss.backward()
        print(knob.grad)

Run All runs the body at once, so every later cell finds the state it expects; only what the body prints or
displays is held (IPython's `capture_output`, in the kernel: nothing reaches the cell's saved output, so nbval
compares the waiting line). The cell shows "Commit your guess above first" until the guess is committed, then the
held output in its place. Run after the commit, the body prints as any cell does. A page without a kernel shows
the waiting line and the output folded under it. A body that raises shows what it printed, then the error.
Inside `with`, a last expression is not shown by itself: `display(table)` it (a figure: `plt.show()` or
`display(fig)`; one left for the inline backend to draw at the cell's end is not held).
"""
from __future__ import annotations

import html
from contextlib import contextmanager
from typing import Callable, ContextManager, Iterator

import ipywidgets as W
from IPython.display import display
from IPython.utils.capture import CapturedIO, capture_output

from widgets.controls.compat import Displayed
from widgets.exercises.toolkit import Exercise

WAITING = "Commit your guess above first: the answer shows here then."
WORKED_WAITING = "Check an answer of your own above first: the worked answer shows here then."


def _as_outputs(captured: CapturedIO) -> tuple[dict, ...]:
    """The captured text and displays as an Output widget's outputs (printed text first, then displays)."""
    outputs = [{"output_type": "stream", "name": name, "text": text}
               for name, text in (("stdout", captured.stdout), ("stderr", captured.stderr)) if text]
    outputs += [{"output_type": "display_data", "data": dict(shown.data), "metadata": dict(shown.metadata or {})}
                for shown in captured.outputs]
    return tuple(outputs)


def _as_text(outputs: tuple[dict, ...]) -> str:
    return "".join(o["text"] if o["output_type"] == "stream" else o["data"].get("text/plain", "") + "\n"
                   for o in outputs)


def _escape(text: str) -> str:
    return html.escape(text, quote=False)  # a text node: quotes stay quotes


class HeldOutput(Displayed, W.Output):
    """A cell's output held back: `waiting` until `release()`, then the output itself. Made by `held_until`."""

    def __init__(self, waiting: str, held: tuple[dict, ...]):
        super().__init__()
        self.waiting, self.held, self.released = waiting, held, False
        line = {"text/plain": waiting, "text/html": f"<p><i>{_escape(waiting)}</i></p>"}
        self.outputs = ({"output_type": "display_data", "data": line, "metadata": {}},)

    def release(self) -> None:
        """Show the held output in place of the waiting line."""
        self.outputs, self.released = self.held, True

    def __repr__(self) -> str:
        return self.waiting

    def _repr_mimebundle_(self, **kwargs):
        """The live Output with a kernel; without one, the waiting line and the output folded under it."""
        bundle = super()._repr_mimebundle_(**kwargs)
        data = bundle[0] if isinstance(bundle, tuple) else bundle
        data["text/plain"] = repr(self)
        data["text/html"] = (f"<details><summary><i>{_escape(self.waiting)}</i> Reading without running? Click here "
                             "to see what this cell printed.</summary>"
                             f"<pre>\n{_escape(_as_text(self.held))}</pre></details>")  # <pre>'s first newline is not shown
        return bundle


@contextmanager
def held_until(released: bool, on_release: Callable[[Callable[[], None]], None], waiting: str = WAITING
               ) -> Iterator[None]:
    """Run the `with` body now; if not `released` yet, hold its output in a `HeldOutput` shown at the end of the body
    and hand its `release` to `on_release` (which calls it once, e.g. when the guess is committed)."""
    if released:
        yield
        return
    try:
        with capture_output() as captured:
            yield
    except BaseException:
        captured.show()  # an error is not the answer: what the body printed before it, then the traceback
        raise
    held = HeldOutput(waiting, _as_outputs(captured))
    on_release(held.release)
    display(held)


def worked_answer(exercise: Exercise) -> ContextManager[None]:
    """`with worked_answer(ex.plan):` holds a worked-answer cell's output until the learner's own answer has been
    checked (Correct or Incorrect; the body's own check does not count): Run All does not solve the exercise."""
    return held_until(exercise.attempted, exercise.when_checked, WORKED_WAITING)
