"""Researcher notebook 1's exercises (`exactness_exercises`): the token checker compares with one real big batch, in float64."""
from __future__ import annotations

import math

import torch

from widgets.core.accumulation import IGNORE_INDEX, flat_grad, real_tokens
from widgets.exercises.passes import PassWatch, check_structure, proportional
from widgets.exercises.toolkit import Exercise, ExerciseSet, Feedback, as_numbers, close_to, correct, incorrect
from widgets.exercises.toolkit import not_attempted
from widgets.lessons.researcher_1.precision import MODES
from widgets.research.tokens import (
    TinyCausalLM,
    accumulated_token_gradient,
    big_batch_token_gradient,
    make_token_batch,
    split_window,
)

SIZES = (5, 3, 2)


def _check_weights(answer: object) -> Feedback:
    values = as_numbers(answer, "weights")
    if len(values) != len(SIZES):
        return incorrect(f"give one weight per micro-batch: {len(SIZES)} numbers, got {len(values)}")
    if close_to(values, [1 / 3] * 3):
        return incorrect("1/K each is right only when the micro-batches are the same size; these hold 5, 3 and 2 "
                         "examples, so the mean of 5 must count 5/10 of the big mean")
    if close_to(values, [1.0] * 3):
        return incorrect("weights of 1 add three means: the pile would be about 3x the big-batch gradient")
    if close_to(values, [n / sum(SIZES) for n in SIZES]):
        return correct("n_i / n: each micro-batch mean counts in proportion to the examples behind it, and the "
                       "weighted means add up to the big mean exactly.")
    if close_to(sum(values), 1.0):
        return incorrect(f"your weights add up to 1, but {values} do not follow the sizes {list(SIZES)}: "
                         "weight i is n_i / n")
    return incorrect(f"the weights must add up to 1 (yours add up to {sum(values):.4g}); weight i is n_i / n")


def accumulate_tokens(model: torch.nn.Module, micro_batches: list[tuple[torch.Tensor, torch.Tensor]]) -> None:
    """Worked answer: leave in .grad the gradient of the mean over all real tokens of the window."""
    window_tokens = sum(real_tokens(labels) for _, labels in micro_batches)  # before any backward
    for inputs, labels in micro_batches:
        logits = model(inputs)
        token_sum = torch.nn.functional.cross_entropy(
            logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), ignore_index=IGNORE_INDEX, reduction="sum")
        (token_sum / window_tokens).backward()  # a sum over tokens, scaled by the window's token count


def _token_problem():
    batch = make_token_batch(16, 24, 0.8, seed=3)
    parts = split_window(batch, 4)
    return batch, [(batch.inputs[p], batch.labels[p]) for p in parts]


def _check_tokens(answer: object) -> Feedback:
    batch, micro_batches = _token_problem()
    model = TinyCausalLM(seed=3)
    reference = big_batch_token_gradient(model, batch).grad
    per_micro = accumulated_token_gradient(model, batch, 4, "per_micro_batch").grad
    model.zero_grad(set_to_none=True)
    with torch.random.fork_rng(devices=[]), PassWatch(model) as watch:
        answer(model, micro_batches)
    empty = any(p.grad is None for p in model.parameters())
    if not watch.record.forwards and empty:
        return not_attempted("your function never calls the model: fill in its body")
    if empty:
        return incorrect("your function left .grad empty: call .backward() on each micro-batch's loss")
    grad = flat_grad(model)
    if watch.record.forwards == [16]:
        return incorrect("one pass over all 16 sequences is the big batch itself: run the 4 micro-batches one by one")
    check_structure(watch, [len(x) for x, _ in micro_batches], "sequences")
    if torch.allclose(grad, reference, rtol=1e-7, atol=1e-10):
        return correct("the token sums over the window's real-token count: the big batch's gradient, to float64 rounding.")
    if torch.allclose(grad, per_micro, rtol=1e-7, atol=1e-10):
        return incorrect("that is the 2024 bug: a token mean per micro-batch divided by K weighs every micro-batch "
                         "alike. Sum the token losses and divide by the real tokens of the whole window")
    ratio = proportional(grad, reference)
    if ratio is not None:
        window = real_tokens(batch.labels)
        padded = batch.labels.numel()
        if math.isclose(ratio, window, rel_tol=1e-6):
            return incorrect("your pile is the token-loss sum, never divided: divide by the window's real tokens")
        if math.isclose(ratio, window / padded, rel_tol=1e-6):
            return incorrect("you divided by every position, padding included: count only labels != -100")
        return incorrect(f"right direction, wrong size: your pile is {ratio:.4g}x the big-batch gradient; "
                         "divide each micro-batch's token sum by the real tokens of the whole window")
    return incorrect(f"the pile does not match the big batch (max |diff| = {float((grad - reference).abs().max()):.3g})")


def _check_precision(answer: object) -> Feedback:
    if not isinstance(answer, str):
        return incorrect(f"answer with a mode's name as a string, one of {sorted(MODES)}")
    if answer not in MODES:
        return incorrect(f"{answer!r} is not one of the modes {sorted(MODES)}")
    if answer == "bf16_params":
        return correct("its .grad is bfloat16, so each of the K additions rounds to 8 bits of mantissa, and the "
                       "rounding errors pile up with K. Every other mode keeps its running sum in float32 or float64.")
    if answer == "bf16_autocast":
        return incorrect("under autocast the matmul is bfloat16, but .grad is float32: its error is set by one "
                         "pass's rounding and stays flat in K")
    if answer == "bf16_params_fp32_master":
        return incorrect("that is the fix: the running sum is kept in float32, so the bfloat16 rounding happens "
                         "once per micro-batch's own gradient and never accumulates")
    return incorrect(f"{answer} keeps .grad in a wide format; its error sits at that format's rounding level for every K")


def exactness_exercises() -> ExerciseSet:
    """The exercises of researcher notebook 1 (why accumulation is exact)."""
    return ExerciseSet("Why accumulation is exact", [
        Exercise(
            name="weights", title="Weights for unequal micro-batches",
            prompt="One update's 10 examples arrive in micro-batches of 5, 3 and 2, each loss a mean over its own "
            "examples. Which three weights make the weighted sum of the three means equal the mean over all 10? "
            "`ex.weights.check([w1, w2, w3])`.",
            checker=_check_weights,
            hints=["Write the big mean as one sum over 10 examples, then group the sum by micro-batch.",
             "The sum over micro-batch i is n_i times its mean.",
             "Weight i is n_i / n: 5/10, 3/10, 2/10."],
            solution="weights = [5 / 10, 3 / 10, 2 / 10]",
            explanation="The big mean is (1/n) Σ_i n_i · mean_i, so micro-batch i gets weight n_i / n.",
        ),
        Exercise(
            name="tokens", title="Write the window-level token normaliser",
            prompt="Write `accumulate_tokens(model, micro_batches)`: `micro_batches` is a list of `(inputs, labels)` "
            "pairs, padding labelled -100. Leave in `.grad` the gradient of the mean loss over all real tokens "
            "of the window, one backward per micro-batch. `ex.tokens.check(accumulate_tokens)` runs it on a "
            "tiny causal language model against one big batch.",
            checker=_check_tokens,
            hints=["A mean per micro-batch weighs each micro-batch alike, whatever its token count. What should each "
             "real token weigh instead?",
             "Use cross_entropy(..., ignore_index=-100, reduction='sum') for each micro-batch's token sum.",
             "Count (labels != -100).sum() over all micro-batches before the first backward, and divide every "
             "token sum by that count."],
            solution=accumulate_tokens,
            explanation="Every real token of the window weighs 1 / (real tokens in the window), whichever micro-batch it is in.",
        ),
        Exercise(
            name="precision", title="Which error grows with K?",
            prompt="Of the modes `float64`, `float32`, `bf16_autocast`, `bf16_params` and `bf16_params_fp32_master`, "
            "which one's accumulated-gradient error grows as K grows? Predict before the plot, then "
            "`ex.precision.check('mode')`.",
            checker=_check_precision,
            hints=["Each backward adds into .grad: the addition rounds to .grad's dtype.",
             "Which mode keeps .grad itself in bfloat16?"],
            solution="answer = 'bf16_params'",
            explanation="Only a bfloat16 `.grad` rounds at every one of the K additions.",
        ),
    ])
