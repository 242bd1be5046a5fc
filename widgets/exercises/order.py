"""Cells run out of order: a `NameError` in a notebook cell says what to run first.

A learner who runs an exercise cell before the cells it builds on gets Python's bare
`NameError: name 'my_ratio' is not defined`. Creating an exercise set (`proof_exercises()` and
the others) calls `explain_name_errors()`, which asks IPython to add one sentence to such errors:
a cell above defines the name, and how to run the cells above. Only `NameError` is touched, the
traceback itself is kept, and outside IPython (tests, scripts) nothing happens. Pure Python:
IPython is used only if it is already running. (The set itself, `ex`, is made by the notebook's
first code cell; before that cell runs nothing of the package is loaded, so the notebook's
introduction says to run it first.)
"""
from __future__ import annotations

import sys

from widgets.exercises.toolkit import RUN_ALL_ABOVE


def name_error_note(name: str) -> str:
    """The sentence added to a NameError for `name`."""
    return (f"`{name}` is not defined in this kernel yet. If a cell above defines it (your answer, a helper, "
            f"the data), run that cell first: {RUN_ALL_ABOVE}. If none does, check the spelling.")


def _add_note_and_show(shell, etype, value, tb, tb_offset=None):
    name = getattr(value, "name", None)
    if name and not any(f"`{name}`" in note for note in getattr(value, "__notes__", [])):
        value.add_note(name_error_note(name))
    shell.showtraceback((etype, value, tb), tb_offset=tb_offset)


def explain_name_errors() -> bool:
    """In IPython, add `name_error_note` to every NameError a cell raises; returns whether it could."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    if shell is None:
        return False
    shell.set_custom_exc((NameError,), _add_note_and_show)
    return True
