"""Researcher notebook 2's exercises (`breaks_exercises`): the gradient-cache checker watches both towers' passes."""
from __future__ import annotations

import torch

from widgets.core.accumulation import flat_grad
from widgets.exercises.passes import PassWatch, check_structure, proportional
from widgets.exercises.toolkit import Exercise, ExerciseSet, Feedback, close_to, correct, number_checker, two_numbers
from widgets.exercises.toolkit import diagnose, incorrect, not_attempted
from widgets.lessons.researcher_2.contrastive import (
    full_batch_contrastive,
    info_nce,
    make_encoders,
    make_pairs,
    naive_accumulated_contrastive,
)


_check_ghost_size = number_checker(8, {
    32.0: "32 is the effective batch K·b, the statistics you wanted; accumulation never sees 32 examples at once",
    4.0: "4 is K, the number of micro-batches; the statistics come from the examples inside one of them",
    1.0: "BatchNorm in training mode normalises over the batch dimension, not per example (that would be LayerNorm)",
}, "{value:g} is not it: which examples share one forward pass?",
    "each micro-batch of 8 is normalised with its own 8 examples: ghost batch norm with ghost size b.", "ghost_size")


def gradient_cache_step(encoders: torch.nn.ModuleDict, a: torch.Tensor, b: torch.Tensor,
                        accumulation_steps: int, temperature: float = 0.1) -> None:
    """Worked answer: leave in .grad the full-batch InfoNCE gradient, one micro-batch graph at a time."""
    parts = torch.arange(a.shape[0]).chunk(accumulation_steps)
    with torch.no_grad():  # 1. embed everything, no graph
        za = torch.cat([encoders["a"](a[p]) for p in parts]).requires_grad_()
        zb = torch.cat([encoders["b"](b[p]) for p in parts]).requires_grad_()
    info_nce(za, zb, temperature).backward()  # 2. full-batch loss: d loss / d embeddings
    for p in parts:  # 3. re-run each micro-batch with a graph, push its slice of the cached gradient
        torch.autograd.backward([encoders["a"](a[p]), encoders["b"](b[p])], [za.grad[p], zb.grad[p]])


def _check_cache(answer: object) -> Feedback:
    a, b = make_pairs(32, seed=5)
    encoders = make_encoders(seed=5)
    reference = full_batch_contrastive(encoders, a, b).grad
    naive = naive_accumulated_contrastive(encoders, a, b, 4).grad
    encoders.zero_grad(set_to_none=True)
    with torch.random.fork_rng(devices=[]), PassWatch(encoders["a"], encoders["b"]) as watch:
        answer(encoders, a, b, 4, 0.1)
    sizes = watch.record.forwards
    empty = any(p.grad is None for p in encoders.parameters())
    if not sizes and empty:
        return not_attempted("your function never calls the encoders: fill in its body")
    if empty:
        return incorrect("the encoders' .grad is empty: step 3 must backpropagate into both towers")
    grad = flat_grad(encoders)
    check_structure(watch, [8] * 4, "examples")
    if torch.allclose(grad, reference, rtol=1e-7, atol=1e-10):
        return correct("the full-batch gradient, with one micro-batch of 8 per backward pass through each tower: "
                       "no more than one micro-batch's graph was ever alive.")
    if torch.allclose(grad, naive, rtol=1e-7, atol=1e-10):
        return incorrect("that is plain accumulation: each micro-batch's own InfoNCE, with only 7 negatives per "
                         "example. Compute the loss once, on all 32 cached embeddings")
    ratio = proportional(grad, reference)
    if ratio is not None:
        return incorrect(f"right direction, {ratio:.4g}x the size: the cached gradient is already the full batch's; "
                         "do not divide or multiply it by K")
    return incorrect(f"the pile does not match the full batch (max |diff| = {float((grad - reference).abs().max()):.3g})")


def _check_clip(answer: object) -> Feedback:
    before, after = two_numbers(answer, "(before clipping, after clipping)")
    if close_to(before, 4) and close_to(after, 1):
        return correct("before clipping the undivided pile is K = 4 times longer; clipping rescales both to "
                       "max_grad_norm, so after it they are identical and the missing division leaves no trace.")
    if not close_to(before, 4):
        return diagnose(before, {
            1.0: "before clipping the two piles differ: one adds 4 undivided means",
            0.25: "upside down: undivided / divided",
            16.0: "the norm scales like the gradient itself, linearly: K, not K²",
        }, f"before clipping: {before:g} is not it. How many times bigger is a sum of K means than their mean?")
    return diagnose(after, {
        4.0: "both pre-clip norms are far above max_grad_norm = 0.05, so both are rescaled to exactly 0.05",
    }, f"after clipping: {after:g} is not it. What length does clip_grad_norm_ give a gradient longer than max_grad_norm?")


def breaks_exercises() -> ExerciseSet:
    """The exercises of researcher notebook 2 (where it breaks)."""
    return ExerciseSet("Where accumulation breaks", [
        Exercise(
            name="ghost_size", title="Name what accumulation computes",
            prompt="A model with BatchNorm is trained with accumulation_steps K = 4 and micro_batch_size b = 8. "
            "Accumulation is exactly ghost batch norm on the effective batch, with which ghost size? "
            "`ex.ghost_size.check(number)`.",
            checker=_check_ghost_size,
            hints=["Batch norm takes its mean and variance over the examples of one forward pass.",
             "How many examples are in one forward pass when you accumulate?"],
            solution="ghost_size = 8  # the micro_batch_size b",
            explanation="Each forward pass holds b = 8 examples, so the statistics are over groups of 8.",
        ),
        Exercise(
            name="cache", title="Write the gradient-cache step",
            prompt="Write `gradient_cache_step(encoders, a, b, accumulation_steps, temperature)` that leaves in "
            "`.grad` the gradient of the full-batch `info_nce` over all pairs, while no encoder pass sees more "
            "than one micro-batch. `ex.cache.check(gradient_cache_step)` (32 pairs, K = 4).",
            checker=_check_cache,
            hints=["Three steps: embed without a graph; full-batch loss on the embeddings; re-run with a graph.",
             "Make the cached embeddings leaves with requires_grad_(), call backward on the loss: their .grad is "
             "d loss / d embedding.",
             "For each micro-batch: torch.autograd.backward([za_part, zb_part], [za.grad[part], zb.grad[part]])."],
            solution=gradient_cache_step,
            explanation="Gao et al. (2021): the loss sees every negative; the encoders see one micro-batch at a time.",
        ),
        Exercise(
            name="clip", title="Clipping hides a missing division",
            prompt="Run A divides each micro-batch loss by K = 4, run B forgets to; both clip with max_grad_norm = 0.05 "
            "and the pre-clip norms are all above 1. Give (norm B / norm A before clipping, after clipping): "
            "`ex.clip.check((before, after))`.",
            checker=_check_clip,
            hints=["A sum of K means is K times the mean of the K means.",
             "clip_grad_norm_ rescales any gradient longer than max_grad_norm to exactly max_grad_norm."],
            solution="answer = (4, 1)",
            explanation="Before: K = 4. After: both have length 0.05 and the same direction, so 1.",
        ),
    ])
