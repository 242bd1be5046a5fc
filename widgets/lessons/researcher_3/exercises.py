"""Researcher notebook 3's exercises (`noise_exercises`): gradient noise and the critical batch size."""
from __future__ import annotations

from widgets.exercises.toolkit import Exercise, ExerciseSet, Feedback, close_to, correct, number_checker, two_numbers
from widgets.exercises.toolkit import incorrect
from widgets.research.noise_scale import b_simple_from_norms

# the window of the first exercise: K = 4 micro-batches of b = 8
SMALL_SQ, BIG_SQ, B, K = 5.0, 2.0, 8, 4
S_MIN, E_MIN = 25.0, 1600.0


EXACT = b_simple_from_norms(SMALL_SQ, BIG_SQ, B, K)
_check_b_simple = number_checker(EXACT, {
    SMALL_SQ / BIG_SQ: "5 / 2 divides the two measured norms; B_simple divides tr(Sigma) by |G|^2, each "
                       "estimated from both norms and both batch sizes.",
    BIG_SQ / SMALL_SQ: "that is the ratio of the measured norms, upside down; estimate |G|^2 and tr(Sigma) first.",
    3.0: "3 = 5 - 2 is only the numerator of tr(Sigma); divide it by (1/b - 1/(K b)) = 1/8 - 1/32.",
    16.0: "close: you used |G|^2 = 2 (the big-batch norm) but it still holds tr(Sigma)/32 of noise. "
          "Unbias it: |G|^2 = (32 x 2 - 8 x 5) / (32 - 8).",
    1.0: "1 is |G|^2; B_simple is tr(Sigma) / |G|^2.",
}, "{value:g} is not it: |G|^2 = (B_big |G_big|^2 - B_small |G_small|^2) / (B_big - B_small) and "
   "tr(Sigma) = (|G_small|^2 - |G_big|^2) / (1/B_small - 1/B_big), with B_small = 8 and B_big = 32.",
    f"|G|^2 = (32 x 2 - 8 x 5) / 24 = 1 and tr(Sigma) = (5 - 2) / (1/8 - 1/32) = 32, so B_simple = {EXACT:g} examples.",
    "B_simple")


def _check_critical(answer: object) -> Feedback:
    b_crit, steps = two_numbers(answer, "(b_crit, steps_at_b_crit)")
    if not close_to(b_crit, E_MIN / S_MIN):
        if close_to(b_crit, S_MIN / E_MIN):
            return incorrect("B_crit is E_min / S_min (examples per step), not S_min / E_min.")
        return incorrect(f"B_crit = E_min / S_min; {b_crit:g} is not 1600 / 25.")
    if close_to(steps, 2 * S_MIN):
        return correct("B_crit = 64, and there S = S_min (1 + B_crit / B) = 2 S_min = 50 steps: twice the fewest "
                       "possible, with twice the fewest examples. That balance is what 'critical' means.")
    if close_to(steps, S_MIN):
        return incorrect("S_min is only reached at an infinite batch; at B = B_crit, S = S_min (1 + B_crit / B).")
    return incorrect(f"{steps:g} steps is not it: put B = B_crit into S = S_min (1 + B_crit / B).")


def noise_exercises() -> ExerciseSet:
    """The exercises of researcher notebook 3."""
    return ExerciseSet("Gradient noise and the critical batch size", [
        Exercise(
            name="b_simple", title="B_simple by hand",
            prompt="One accumulation window: K = 4 micro-batches of b = 8. The mean of their squared gradient norms is "
            "5.0; the squared norm of their mean (the accumulated gradient) is 2.0. Compute B_simple and check "
            "it: `ex.b_simple.check(value)`.",
            checker=_check_b_simple,
            hints=["The two batch sizes are B_small = b = 8 and B_big = K b = 32.",
             "|G|^2 = (32 x 2.0 - 8 x 5.0) / (32 - 8); tr(Sigma) = (5.0 - 2.0) / (1/8 - 1/32).",
             "|G|^2 = 1 and tr(Sigma) = 32."],
            solution="b_simple_from_norms(small_sq=5.0, big_sq=2.0, micro_batch_size=8, accumulation_steps=4)  # 32.0",
            explanation="Both norms and both batch sizes go into each estimate; only then take the ratio.",
        ),
        Exercise(
            name="critical", title="Read the trade-off curve",
            prompt="A fit gave S_min = 25 steps and E_min = 1600 examples. What is B_crit, and how many steps does "
            "training take at B = B_crit? `ex.critical.check((b_crit, steps))`.",
            checker=_check_critical,
            hints=["B_crit = E_min / S_min.", "S(B) = S_min (1 + B_crit / B); put B = B_crit."],
            solution="b_crit = 1600 / 25          # 64 examples\nsteps = 25 * (1 + b_crit / b_crit)   # 50",
            explanation="At the critical batch both steps and examples are twice their minimum.",
        ),
    ])
