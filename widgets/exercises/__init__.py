"""Checked exercises: the check/hint/solution toolkit (`toolkit`) every lesson's set is built with.

May import: torch, the standard library, `widgets.core`, `widgets.lab`, `widgets.research` and
`widgets.audit`. Never matplotlib or ipywidgets. Each notebook's set lives with its lesson
(`widgets/lessons/<lesson>/exercises.py`) and is imported from the lesson's surface:

    from widgets.lessons.developer_1 import proof_exercises
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
