"""Checked exercises: the check/hint/solution toolkit (`toolkit`) and one module per notebook's set.

May import: torch, the standard library, `widgets.core`, `widgets.research` and `widgets.audit`.
Never matplotlib or ipywidgets. The sets a notebook calls are importable from here:

    from widgets.exercises import proof_exercises
    ex = proof_exercises()
    ex.ratio.check(my_ratio)     # Correct / Incorrect: why / Not attempted / Cannot check yet
    ex.ratio.hint()              # one at a time, each more specific
    ex.ratio.solution()          # after a checked attempt; solution(anyway=True) shows it regardless

Checkers judge what an answer does, on problems of their own (not the notebook's demonstration):
the package's own answer handed back, wrapped or partially applied is rejected (`provenance`),
hooks count the backward passes and the examples each one carried (`passes`), a whole loop is
judged by the loop auditor (`widgets.audit`, the one watcher), and a `NameError` says which
earlier cell to run (`order`).
"""
import importlib

_SETS = {  # exercise set -> the module that builds it; loaded on first use, so that the toolkit
    # itself (`widgets.exercises.toolkit`) stays pure Python without torch
    "proof_exercises": "widgets.exercises.developer",
    "loop_exercises": "widgets.exercises.developer",
    "gallery_exercises": "widgets.exercises.developer",
    "beginner_exercises": "widgets.exercises.beginner",
    "exactness_exercises": "widgets.exercises.researcher_1",
    "breaks_exercises": "widgets.exercises.researcher_2",
    "noise_exercises": "widgets.exercises.researcher_3",
    "memory_exercises": "widgets.exercises.researcher_4",
    "machines_exercises": "widgets.exercises.researcher_5",
    "stages_exercises": "widgets.exercises.researcher_7",
    "losses_exercises": "widgets.exercises.researcher_8",
    "ranks_exercises": "widgets.exercises.researcher_6",
    "adam_exercises": "widgets.exercises.researcher_9",
}
__all__ = sorted(_SETS)


def __getattr__(name: str):
    if name in _SETS:
        return getattr(importlib.import_module(_SETS[name]), name)
    raise AttributeError(f"module 'widgets.exercises' has no attribute {name!r}")
