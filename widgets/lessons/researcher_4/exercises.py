"""Researcher notebook 4 (memory and time, measured): its checked exercises."""
from __future__ import annotations

from widgets.exercises.toolkit import Exercise, ExerciseSet, Feedback, close_to, correct, number_checker, two_numbers
from widgets.exercises.toolkit import incorrect

PARAMS = 1.5e9
GB = 1e9
FIXED_GB, PER_EXAMPLE_GB, BUDGET_GB, TARGET = 6.0, 0.3, 10.0, 64


_check_adam = number_checker(16 * PARAMS, {
    12 * PARAMS: "12 bytes per parameter is the optimizer state alone; add the 16-bit weights and gradients.",
    4 * PARAMS: "4 bytes per parameter is only the 16-bit weights and gradients; Adam's fp32 state is 12 more.",
    8 * PARAMS: "8 bytes per parameter is momentum and variance in fp32; the fp32 master weights and the "
                "16-bit weights and gradients are missing.",
    2 * PARAMS: "2 bytes per parameter is the bf16 weights alone.",
}, "{value:.3g} bytes is not it: count bytes per parameter for weights, gradients and Adam's state.",
    "16 bytes per parameter: 2 (bf16 weights) + 2 (bf16 gradients) + 12 (fp32 master weights, momentum, variance) "
    "= 24e9 bytes, before a single activation.", "bytes")


def _check_plan(answer: object) -> Feedback:
    b, k = two_numbers(answer, "(micro_batch_size, accumulation_steps)")
    if not close_to(b * k, TARGET):
        return incorrect(f"b x K = {b * k:g}, but the target effective batch is {TARGET}.")
    memory = FIXED_GB + PER_EXAMPLE_GB * b
    if memory > BUDGET_GB:
        return incorrect(f"b = {b:g} needs {memory:.1f} GB: over the {BUDGET_GB:g} GB budget.")
    if close_to(b, 8):
        return correct("with b = 8 the step needs 6 + 0.3 x 8 = 8.4 GB; b = 16 would need 10.8 GB. K = 8 micro-steps "
                       "per update.")
    return incorrect(f"b = {b:g} fits, but a larger micro-batch that divides {TARGET} also fits and needs fewer "
                     "micro-steps (less time per update).")


def memory_exercises() -> ExerciseSet:
    """The exercises of researcher notebook 4."""
    return ExerciseSet("Memory and time", [
        Exercise(
            name="adam_bytes", title="Adam in mixed precision",
            prompt="A model has 1.5e9 parameters and trains with Adam in mixed precision (bf16 weights and gradients, "
            "fp32 master weights and moments). How many bytes do weights, gradients and optimizer state take? "
            "`ex.adam_bytes.check(value)`.",
            checker=_check_adam,
            hints=["Count bytes per parameter for each of the three terms.",
             "Weights 2, gradients 2, optimizer state 4 + 4 + 4."],
            solution="16 * 1.5e9   # 24e9 bytes",
            explanation="Rajbhandari et al. (2020) count 2 + 2 + 12 = 16 bytes per parameter.",
        ),
        Exercise(
            name="plan", title="Choose b and K for a budget",
            prompt="Parameters, gradients and optimizer state take 6 GB; activations take 0.3 GB per example; the device "
            "has 10 GB; you want an effective batch of 64. Choose the micro-batch size b (dividing 64) and K: "
            "`ex.plan.check((b, K))`.",
            checker=_check_plan,
            hints=["Memory = 6 + 0.3 b GB must stay at or below 10.",
             "b <= 13.3, and b must divide 64: the candidates are 1, 2, 4, 8."],
            solution="b = 8; K = 64 // b   # 8.4 GB, K = 8",
            explanation="The largest b that fits wastes the least time on per-micro-step overhead.",
        ),
    ])
