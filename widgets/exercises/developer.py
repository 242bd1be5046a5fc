"""The developer tier's exercises, one set per notebook, each with a checker that says what is wrong.

    from widgets.exercises.developer import proof_exercises
    ex = proof_exercises()
    ex.ratio.check(my_ratio)      # Correct / Incorrect: why / Not attempted
    ex.ratio.hint()               # hints one at a time
    ex.ratio.solution()           # after a checked attempt (or solution(anyway=True))

The learner passes every answer explicitly, a value or a function; the checkers build their own
small problems (seeded, without touching the global random state) and compare against the
package's reference code, so they never depend on what the notebook did before. A whole loop is
judged by the loop auditor (`widgets.audit`); the lab's one correct loop is
`widgets.core.loop.train_loop`. Each notebook's
set lives in its own module (`proof`, `loop`, `gallery`), with its worked answers as real code
(`accumulate_16`, `is_boundary`, `update_loss`, `my_loop`): `solution()` shows their source once
the exercise was attempted, and a checker rejects them handed back as the answer. This module
gathers them under one name for the notebooks.
"""
from widgets.exercises.gallery import gallery_exercises, my_loop
from widgets.exercises.loop import AMP_CALLS, AMP_EXPECTED, is_boundary, loop_exercises, update_loss
from widgets.exercises.proof import accumulate_16, proof_exercises

__all__ = [
    "AMP_CALLS",
    "AMP_EXPECTED",
    "accumulate_16",
    "gallery_exercises",
    "is_boundary",
    "loop_exercises",
    "my_loop",
    "proof_exercises",
    "update_loss",
]
