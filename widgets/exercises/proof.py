"""Developer notebook 1 (proving the equivalence): its exercises, each checker saying what is wrong.

    from widgets.exercises.developer import proof_exercises
    ex = proof_exercises()
    ex.ratio.check(my_ratio)      # Correct / Incorrect: why / Not attempted

The checkers build their own small problem (seeded, inside `torch.random.fork_rng`, so the
learner's random state is left alone) and compare with one real big batch. The worked answer
`accumulate_16` lives here as real code: `solution()` shows its source.
"""
from __future__ import annotations

import math

import torch

from widgets.exercises.toolkit import Exercise, ExerciseSet, Feedback, as_numbers, close_to, correct, diagnose
from widgets.exercises.toolkit import incorrect, needs_function, not_attempted


def _classic_problem(n: int) -> tuple[torch.nn.Linear, torch.Tensor, torch.Tensor]:
    """The notebook's problem with `n` examples: data and target drawn after seed 0, a fresh
    `Linear(4, 1)` made after seed 1. Call inside `torch.random.fork_rng` to leave the
    learner's random state alone."""
    torch.manual_seed(0)
    data, target = torch.randn(n, 4), torch.randn(n, 1)
    torch.manual_seed(1)
    return torch.nn.Linear(4, 1), data, target


def _flat_grad(model: torch.nn.Module) -> torch.Tensor | None:
    grads = [p.grad for p in model.parameters()]
    if any(g is None for g in grads):
        return None
    return torch.cat([g.reshape(-1) for g in grads]).detach().double()


def _proportional(a: torch.Tensor, b: torch.Tensor) -> float | None:
    """The factor r with a = r * b, if there is one (up to float32 rounding); else None."""
    r = float(a @ b / (b @ b))
    return r if torch.allclose(a, r * b, rtol=1e-4, atol=1e-6) else None



def _check_ratio(answer: object) -> Feedback:
    values = as_numbers(answer, "ratio")
    if not all(math.isfinite(v) for v in values):
        return incorrect("your ratio holds inf or nan: divide the accumulated gradient by the big-batch one, "
                         "both taken from fresh models")
    lo, hi = min(values), max(values)
    if not close_to(lo, hi):
        return incorrect(f"the entries of your ratio differ (from {lo:.4g} to {hi:.4g}), so the two gradients are "
                         "not proportional: both runs must start from a fresh model (seed 1) and see the same 8 examples")
    ratio = sum(values) / len(values)
    if close_to(ratio, 4.0):
        return correct("without the division the pile holds four micro-batch means added up, 4 times the mean "
                       "over all 8 examples: the ratio is K, the number of micro-batches, whatever their size.")
    return diagnose(ratio, {
        1.0: "a ratio of 1 means the division is still there: remove the `/ 4`, rebuild both models and compare again.",
        0.25: "that is big-batch / accumulated, the ratio upside down: divide the accumulated gradient by the big-batch one.",
        2.0: "2 is the micro_batch_size b; the ratio counts something else. How many means are added up in the pile?",
        8.0: "8 is the number of examples, but each micro-batch loss is already a mean over its 2 examples: "
             "count micro-batches, not examples.",
        16.0: "16 = 4 x 4: you multiplied the loss by 4 instead of removing the division.",
    }, f"{ratio:.4g} is not it. Count how many micro-batch means the pile adds up when nothing divides them.")


def _check_impersonate_16(answer: object) -> Feedback:
    wrong = needs_function(answer, "accumulate_16")
    if wrong:
        return wrong
    sizes: list[int] = []
    with torch.random.fork_rng(devices=[]):
        model, data, target = _classic_problem(16)
        hook = model.register_forward_hook(lambda module, args, output: sizes.append(args[0].shape[0]))
        answer(model, data, target)
        hook.remove()
        reference, _, _ = _classic_problem(16)
        torch.nn.functional.mse_loss(reference(data), target).backward()
        last, _, _ = _classic_problem(16)
        torch.nn.functional.mse_loss(last(data[-2:]), target[-2:]).backward()
    if not sizes:
        return not_attempted("your function never calls the model: fill in its body")
    grad, ref, last_grad = _flat_grad(model), _flat_grad(reference), _flat_grad(last)
    if grad is None:
        return incorrect(f"your function ran the model {len(sizes)} times but left .grad empty: "
                         "call .backward() on every micro-batch loss")
    if sizes == [16]:
        return incorrect("one pass over all 16 examples is the reference itself: split them into micro-batches of 2")
    if any(s != 2 for s in sizes):
        return incorrect(f"your micro-batches had sizes {sizes}; the exercise asks for micro-batches of 2")
    if len(sizes) != 8:
        return incorrect(f"{len(sizes)} micro-batches of 2 cover {2 * len(sizes)} of the 16 examples; "
                         "a batch of 16 needs 8 of them")
    if torch.allclose(grad, ref, rtol=1e-5, atol=1e-6):
        return correct("8 micro-batches of 2, each loss divided by 8: the pile is the gradient of one batch of 16.")
    factor = _proportional(grad, ref)
    if factor is not None:
        return diagnose(factor, {
            2.0: "your pile is 2x the batch-of-16 gradient: you divided by 4, the K of the demo, but 16 examples "
                 "in micro-batches of 2 make K = 8 micro-batches.",
            8.0: "your pile is 8x the batch-of-16 gradient: the micro-batch losses are not divided. Divide each by K = 8.",
            0.5: "your pile is half the batch-of-16 gradient: you divided by 16, the number of examples, but each "
                 "micro-batch loss is already a mean over its 2 examples. Divide by the number of micro-batches.",
            0.125: "your pile is 1/8 of the batch-of-16 gradient: the loss is divided by 8 twice.",
        }, f"your pile is {factor:.4g}x the batch-of-16 gradient: divide each micro-batch loss by K = 8.")
    if _proportional(grad, last_grad) is not None:
        return incorrect("only the last micro-batch's gradient is left in .grad: something clears the pile inside "
                         "your loop (a zero_grad?)")
    return incorrect(f"the pile does not match the batch-of-16 gradient (max |diff| = {float((grad - ref).abs().max()):.3g})")


def accumulate_16(model: torch.nn.Module, data: torch.Tensor, target: torch.Tensor, micro_batch_size: int = 2) -> None:
    """Worked answer: leave in .grad the gradient of the mean loss over `data`, in micro-batches of 2."""
    accumulation_steps = data.shape[0] // micro_batch_size  # 16 // 2 = 8 micro-batches
    for i in range(0, data.shape[0], micro_batch_size):
        part = slice(i, i + micro_batch_size)
        loss = torch.nn.functional.mse_loss(model(data[part]), target[part])
        (loss / accumulation_steps).backward()


def proof_exercises() -> ExerciseSet:
    """The exercises of developer notebook 1 (proving the equivalence)."""
    return ExerciseSet("Proving the equivalence", [
        Exercise(
            "ratio", "Break the demo on purpose",
            "Remove the `/ 4` from the accumulation loop, keep everything else, and divide the accumulated "
            "weight gradient by the big-batch one. Predict the ratio first, then check it: "
            "`ex.ratio.check(ratio)` (a number or the tensor of ratios).",
            _check_ratio,
            ["Each micro-batch loss is a mean over its 2 examples. What does adding four such means give?",
             "Four means, each about the size of the mean over all 8 examples, add up to about four times it; "
             "gradients are linear, so the same holds for them exactly.",
             "The ratio is the number of micro-batches K = 4 (not the micro-batch size, not the batch size)."],
            """
            undivided = fresh_model()
            for i in range(0, 8, 2):
                loss = torch.nn.functional.mse_loss(undivided(data[i:i + 2]), target[i:i + 2])
                loss.backward()  # no / 4
            ratio = undivided.weight.grad / big.weight.grad  # tensor([[4., 4., 4., 4.]])
            """,
            "The pile adds K means without dividing them, so it is K = 4 times the big-batch gradient.",
        ),
        Exercise(
            "impersonate_16", "Make 2s impersonate 16",
            "Write `accumulate_16(model, data, target)` that runs `data` (16 examples) through `model` in "
            "micro-batches of 2 and leaves in `.grad` the gradient of the mean-squared error over all 16, "
            "then check it: `ex.impersonate_16.check(accumulate_16)`. The checker calls it on a fresh "
            "`Linear(4, 1)` and compares with one real batch of 16.",
            _check_impersonate_16,
            ["How many micro-batches of 2 make 16 examples? That number is accumulation_steps.",
             "Divide each micro-batch loss by that number before calling backward, exactly as the demo divides by 4.",
             "accumulation_steps = 16 // 2 = 8: loop over range(0, 16, 2) and call (loss / 8).backward()."],
            accumulate_16,
            "Sixteen examples in micro-batches of 2 are K = 8 micro-batches; each loss is divided by 8.",
        ),
    ])
