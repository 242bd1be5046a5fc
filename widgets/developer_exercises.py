"""The developer tier's exercises, one set per notebook, each with a checker that says what is wrong.

    from widgets.developer_exercises import proof_exercises
    ex = proof_exercises()
    ex.ratio.check(my_ratio)      # Correct / Incorrect: why / Not attempted
    ex.ratio.hint()               # hints one at a time
    ex.ratio.solution()

The learner passes every answer explicitly, a value or a function; the checkers build their own
small problems (seeded, without touching the global random state) and compare against the
package's reference code, so they never depend on what the notebook did before. The worked
answers that are functions (`accumulate_16`, `is_boundary`, `update_loss`, `my_loop`) live here
as real code: `solution()` shows their source, and the tests check them with their checkers.
"""
from __future__ import annotations

import math
from typing import Callable

import torch

from widgets.accumulation import is_update_step
from widgets.auditor import audit_training_loop
from widgets.exercises import (
    Exercise,
    ExerciseSet,
    Feedback,
    as_number,
    as_numbers,
    close_to,
    correct,
    diagnose,
    incorrect,
    needs_function,
    not_attempted,
)

# ---------------------------------------------------------------------------------------------
# Shared checking helpers


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


# ---------------------------------------------------------------------------------------------
# Notebook 1: proving the equivalence


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


# ---------------------------------------------------------------------------------------------
# Notebook 2: the training loop

_BOUNDARY_GRID = [(m, k, t) for k in range(1, 6) for t in range(1, 14) for m in range(t)]


def _no_tail(m: int, k: int, t: int) -> bool:
    return (m + 1) % k == 0


def _off_by_one(m: int, k: int, t: int) -> bool:
    return m % k == 0


def is_boundary(micro_step: int, accumulation_steps: int, total_micro_steps: int) -> bool:
    """Worked answer: does this micro-step (from 0) end an update?"""
    last = micro_step == total_micro_steps - 1  # the uneven tail still gets its update
    return (micro_step + 1) % accumulation_steps == 0 or last


def _check_boundary(answer: object) -> Feedback:
    wrong = needs_function(answer, "is_boundary")
    if wrong:
        return wrong
    got = {case: answer(*case) for case in _BOUNDARY_GRID}
    if all(v is None for v in got.values()):
        return not_attempted("your function returns None: fill in its body")
    got = {case: bool(v) for case, v in got.items()}
    expected = {case: is_update_step(*case) for case in _BOUNDARY_GRID}
    if got == expected:
        return correct("every K-th micro-step ends an update, and so does the last one, uneven tail included.")
    if all(got[c] == _no_tail(*c) for c in _BOUNDARY_GRID):
        return incorrect("right for full groups, but when total_micro_steps does not divide by K the last "
                         "micro-step (e.g. micro_step 9 of 10 with K = 4) never updates: the tail's gradient stays "
                         "in .grad, never applied. Also end an update when micro_step == total_micro_steps - 1.")
    if all(got[c] == (_off_by_one(*c) or c[0] == c[2] - 1) for c in _BOUNDARY_GRID) or all(
        got[c] == _off_by_one(*c) for c in _BOUNDARY_GRID
    ):
        return incorrect("your updates come at micro_step 0, K, 2K, ...: after the first micro-batch of each "
                         "group. micro_step counts from 0, so the K-th micro-batch is micro_step K - 1: "
                         "test (micro_step + 1) % accumulation_steps == 0.")
    m, k, t = next(c for c in _BOUNDARY_GRID if got[c] != expected[c])
    return incorrect(f"for micro_step={m}, accumulation_steps={k}, total_micro_steps={t} it returns {got[(m, k, t)]}, "
                     f"but that micro-step {'ends' if expected[(m, k, t)] else 'does not end'} an update.")


_TAIL_SIZES = (8, 8, 3)


def _check_tail_weights(answer: object) -> Feedback:
    weights = as_numbers(answer, "weights")
    if len(weights) != len(_TAIL_SIZES):
        return incorrect(f"give one weight per micro-batch of this group: {len(_TAIL_SIZES)} of them, got {len(weights)}")
    total = sum(_TAIL_SIZES)
    if all(close_to(w, n / total) for w, n in zip(weights, _TAIL_SIZES)):
        return correct("each micro-batch counts by its share n_k / n of the group's 19 examples, so the pile is "
                       "the gradient of the group's mean loss, as if its 19 examples were one batch.")
    sum_w = sum(weights)

    def same(expected: list[float]) -> bool:
        return all(close_to(w, e) for w, e in zip(weights, expected))

    if same([1 / 4] * 3):
        return incorrect("that divides the tail by the configured K = 4: the weights sum to 0.75, so this update's "
                         "gradient comes out 0.75x the right size; the tail is under-weighted.")
    if same([1 / 3] * 3):
        return incorrect("these sum to 1, but equal weights give the 3-example micro-batch as much say as each "
                         "8-example one: its examples count 8/3 times as much as the others. Weight by size.")
    if same([n / 32 for n in _TAIL_SIZES]):
        return incorrect("you divided by 32, the examples of a full update, but this group holds only 19: "
                         f"your weights sum to {sum_w:.3g}, not 1.")
    if same([float(n) for n in _TAIL_SIZES]):
        return incorrect("those are the micro-batch sizes themselves: divide each by the group's number of examples.")
    if not close_to(sum_w, 1.0):
        return incorrect(f"your weights sum to {sum_w:.4g}; the weights of one update must sum to 1, so that the "
                         "pile is a mean over the group's examples.")
    return incorrect("your weights sum to 1 but are not proportional to the micro-batch sizes 8, 8 and 3.")


def update_loss(micro_losses: list[float], micro_batch_sizes: list[int]) -> float:
    """Worked answer: the mean loss over all the examples of one update."""
    total = sum(loss * n for loss, n in zip(micro_losses, micro_batch_sizes))
    return total / sum(micro_batch_sizes)


_LOSS_CASES = [([0.9, 0.5, 0.7, 0.3], [2, 2, 2, 2]), ([0.8, 0.6, 0.2], [8, 8, 3])]


def _check_update_loss(answer: object) -> Feedback:
    wrong = needs_function(answer, "update_loss")
    if wrong:
        return wrong
    results = [answer(list(losses), list(sizes)) for losses, sizes in _LOSS_CASES]
    if all(r is None for r in results):
        return not_attempted("your function returns None: fill in its body")
    got = [as_number(r, "update_loss(...)") for r in results]

    def matches(rule: Callable[[list[float], list[int]], float]) -> bool:
        return all(close_to(g, rule(ls, ns)) for g, (ls, ns) in zip(got, _LOSS_CASES))

    if matches(lambda ls, ns: sum(l * n for l, n in zip(ls, ns)) / sum(ns)):
        return correct("the mean over the update's examples: each micro-batch mean counts by its size.")
    if matches(lambda ls, ns: ls[-1]):
        return incorrect("that is the last micro-batch's loss alone, what many tutorials print as "
                         "`loss.item() * accumulation_steps` (the divided loss times K): one micro-batch's noise, "
                         "not the update's mean.")
    if matches(lambda ls, ns: ls[-1] * len(ls)):
        return incorrect("that is K times the last micro-batch's loss: these losses were never divided, so "
                         "multiplying by K makes them K times too big, and one micro-batch is not the update anyway.")
    if matches(lambda ls, ns: sum(ls) / len(ls) ** 2) or matches(lambda ls, ns: ls[-1] / len(ls)):
        return incorrect("that is about K times too small: you logged the divided loss (loss / K), the number "
                         "that goes into backward, instead of the mean loss.")
    if matches(lambda ls, ns: sum(ls)):
        return incorrect("that is K times too big: a sum of K micro-batch means, not their mean.")
    if matches(lambda ls, ns: sum(ls) / len(ls)):
        return incorrect("right when the micro-batches are all the same size, but for sizes [8, 8, 3] the plain "
                         "mean over-counts the 3-example micro-batch: weight each loss by its size.")
    losses, sizes = _LOSS_CASES[1]
    return incorrect(f"for losses {losses} and sizes {sizes} your function gives {got[1]:.4g}; "
                     "the update's mean loss is the average over its examples.")


_CLIP_MESSAGES = {
    "A": "(A) clips after every backward: each partial pile is cut to the full threshold, so the micro-batches "
         "that arrive early are clipped differently from the late ones and the update is not the clipped mean gradient.",
    "C": "(C) comes after optimizer.step(): the update has already used the unclipped pile, and zero_grad is about "
         "to throw away what you clipped. The clip does nothing.",
    "D": "(D) comes after zero_grad: the pile is gone (.grad is None), there is nothing left to clip.",
}


def _check_clip_position(answer: object) -> Feedback:
    if not isinstance(answer, str) or answer.strip().upper() not in ("A", "B", "C", "D"):
        return incorrect(f"answer with one of the letters 'A', 'B', 'C' or 'D', got {answer!r}")
    letter = answer.strip().upper()
    if letter == "B":
        return correct("clip once per update, on the completed pile, just before the step uses it.")
    return incorrect(_CLIP_MESSAGES[letter])


def _check_warmup_end(answer: object) -> Feedback:
    updates = as_number(answer, "updates")
    if close_to(updates, 25):
        return correct("scheduler.step() runs K = 4 times per update, so 100 scheduler steps are over after 25 updates.")
    return diagnose(updates, {
        100: "100 is when the warmup ends if the scheduler steps once per update, where it belongs; "
             "here it steps on every micro-step, K = 4 times per update.",
        400: "the scheduler runs K times per update, so the warmup is over sooner, not later.",
        4: "4 is K; the warmup is W = 100 scheduler steps, taken K at a time.",
    }, f"{updates:g} updates is not it: count how many scheduler steps each update takes.")


AMP_CALLS = ("backward", "unscale", "clip", "step", "update", "zero_grad")
AMP_EXPECTED = ["backward", "backward", "unscale", "clip", "step", "update", "zero_grad"]


def _normalise_call(call: object) -> str:
    return str(call).strip().lower().rstrip("()").rstrip("_").removeprefix("scaler.").removeprefix("optimizer.")


def _check_amp_order(answer: object) -> Feedback:
    if isinstance(answer, str) or not isinstance(answer, (list, tuple)):
        return incorrect(f"pass a list of call names, e.g. ['backward', ...], got {type(answer).__name__}")
    calls = [_normalise_call(c) for c in answer]
    unknown = [c for c in calls if c not in AMP_CALLS]
    if unknown:
        return incorrect(f"unknown call name(s) {unknown}; use only {list(AMP_CALLS)}")
    if calls == AMP_EXPECTED:
        return correct("the scale stays fixed while the pile builds; unscale_ once, clip the true gradient, "
                       "step, then update the scale and clear the pile.")
    count = {name: calls.count(name) for name in AMP_CALLS}
    backwards = [i for i, c in enumerate(calls) if c == "backward"]
    if count["backward"] != 2:
        return incorrect(f"one update here has K = 2 micro-steps, so 'backward' comes twice, not {count['backward']} times.")
    if count["unscale"] > 1:
        return incorrect("unscale_ twice before update() raises RuntimeError ('unscale_() has already been called "
                         "on this optimizer since the last update()'): unscale once per update.")
    if count["unscale"] == 0:
        return incorrect("without unscale_ the clip compares the *scaled* gradient (scale x too big) with the "
                         "threshold: unscale_ once, just before clipping.")
    if calls.index("unscale") < backwards[-1]:
        return incorrect("unscale_ before the last backward: that backward then adds scaled gradients to an "
                         "unscaled pile. Unscale once the pile is complete.")
    if "clip" in calls and calls.index("clip") < calls.index("unscale"):
        return incorrect("clipping before unscale_ compares the scaled gradient with the threshold: unscale first.")
    if "zero_grad" in calls and calls.index("zero_grad") < backwards[-1]:
        return incorrect("zero_grad between the micro-steps wipes the first micro-batch's gradient from the pile.")
    if count["clip"] != 1 or count["step"] != 1 or count["update"] != 1 or count["zero_grad"] != 1:
        missing = [n for n in ("clip", "step", "update", "zero_grad") if count[n] != 1]
        return incorrect(f"each of {missing} belongs exactly once per update.")
    if calls.index("step") < calls.index("clip"):
        return incorrect("clipping after the step changes a gradient the update has already used.")
    if calls.index("update") < calls.index("step"):
        return incorrect("update() before step(): scaler.step must see this pile's inf/nan check with the scale "
                         "the pile was built with; update the scale after stepping.")
    return incorrect("not the right order yet: the pile first, then unscale, clip, step, update, zero_grad.")


def loop_exercises() -> ExerciseSet:
    """The exercises of developer notebook 2 (the training loop)."""
    return ExerciseSet("The training loop", [
        Exercise(
            "boundary", "Name the boundary",
            "Write `is_boundary(micro_step, accumulation_steps, total_micro_steps)` that returns True when this "
            "micro-step (counted from 0) ends an update, the last micro-step of an uneven tail included; "
            "check it with `ex.boundary.check(is_boundary)`.",
            _check_boundary,
            ["micro_step counts from 0: with K = 4 the updates come after micro-steps 3, 7, 11, ...",
             "(micro_step + 1) % accumulation_steps == 0 handles full groups. What about the last micro-step "
             "when total_micro_steps does not divide by K?",
             "Return True also when micro_step == total_micro_steps - 1."],
            is_boundary,
            "Every K-th micro-step ends an update, and so does the very last one.",
        ),
        Exercise(
            "tail_weights", "Weight the tail",
            "accumulation_steps K = 4, micro_batch_size b = 8, and the data runs out: the last group holds "
            "micro-batches of 8, 8 and 3 examples. By what factor must each one's mean loss be multiplied so "
            "the pile equals the gradient of one batch of those 19 examples? "
            "`ex.tail_weights.check([w1, w2, w3])`.",
            _check_tail_weights,
            ["Each micro-batch loss is a mean over its own examples. A mean over 19 examples weights each example 1/19.",
             "A micro-batch of n_k examples contributes n_k examples' worth: its weight is n_k / 19.",
             "[8/19, 8/19, 3/19]; `widgets.accumulation.micro_batch_weights([8, 8, 3])` computes it."],
            """
            from widgets.accumulation import micro_batch_weights
            weights = micro_batch_weights([8, 8, 3])  # [8/19, 8/19, 3/19]
            """,
            "Weight each micro-batch by its share of the group's examples.",
        ),
        Exercise(
            "update_loss", "Log the update's loss",
            "Write `update_loss(micro_losses, micro_batch_sizes)`: given the undivided mean loss of each "
            "micro-batch of one update and their sizes, return the number to log for that update. "
            "`ex.update_loss.check(update_loss)` tries equal and uneven micro-batches.",
            _check_update_loss,
            ["The number to log is the mean loss over all the examples of the update, the one a big batch would report.",
             "A micro-batch of n_k examples with mean loss L_k holds n_k * L_k of the total loss.",
             "sum(n_k * L_k) / sum(n_k)."],
            update_loss,
            "Weight each micro-batch's mean loss by its number of examples.",
        ),
        Exercise(
            "clip_position", "Where does the clip go?",
            "In the loop below, where does `torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)` "
            "belong? `ex.clip_position.check('A')` (or 'B', 'C', 'D').\n\n"
            "```python\nfor micro_step, (inputs, targets) in enumerate(batches):\n"
            "    (loss_fn(model(inputs), targets) / accumulation_steps).backward()\n    # (A)\n"
            "    if is_update_step(micro_step, accumulation_steps, len(batches)):\n        # (B)\n"
            "        optimizer.step()\n        # (C)\n        optimizer.zero_grad(set_to_none=True)\n        # (D)\n```",
            _check_clip_position,
            ["Clipping should act on the gradient the update uses.",
             "That gradient exists only once the pile is complete, and only until zero_grad clears it.",
             "Inside the if, before optimizer.step(): (B)."],
            """
            if is_update_step(micro_step, accumulation_steps, len(batches)):
                torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)  # (B): the completed pile
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
            """,
            "(B): once per update, on the completed pile, before the step.",
        ),
        Exercise(
            "warmup_end", "When does the warmup end?",
            "A linear warmup is written for W = 100 updates, accumulation_steps K = 4, and `scheduler.step()` "
            "is called on every micro-step. After how many updates is the warmup over? "
            "`ex.warmup_end.check(number)`.",
            _check_warmup_end,
            ["The scheduler counts its own step() calls, not updates.",
             "Each update takes K micro-steps, and each micro-step calls scheduler.step().",
             "100 / 4 = 25 updates."],
            "warmup_end = 100 // 4  # 25 updates: the schedule runs K times too fast",
            "The scheduler runs K = 4 times per update, so W = 100 of its steps take 25 updates.",
        ),
        Exercise(
            "amp_order", "Mixed precision, in order",
            f"With a GradScaler, gradient clipping and accumulation_steps K = 2, list the calls of one update "
            f"in order, using the names {list(AMP_CALLS)} ('backward' stands for scaler.scale(loss).backward() "
            "and appears once per micro-step): `ex.amp_order.check([...])`.",
            _check_amp_order,
            ["The scale must not change while the pile is building, and unscale_ may run only once per update.",
             "Clip the true (unscaled) gradient; step before update, because update changes the scale.",
             "backward, backward, unscale, clip, step, update, zero_grad."],
            "calls = ['backward', 'backward', 'unscale', 'clip', 'step', 'update', 'zero_grad']",
            "Build the pile at a fixed scale, then unscale once, clip, step, update the scale, clear.",
        ),
    ])


# ---------------------------------------------------------------------------------------------
# Notebook 3: the bug gallery


def _check_sum_reduction(answer: object) -> Feedback:
    factor = as_number(answer, "factor")
    if close_to(factor, 1 / 32):
        return correct("a summed loss is b = 8 times its mean, and K = 4 of them pile up: divide by K x b = 32, "
                       "the number of examples in the update.")
    relative = factor * 32  # what the pile comes out as, in units of the big-batch gradient
    return diagnose(factor, {
        1 / 4: "1/K assumes a mean-reduced loss. A loss summed over b = 8 examples is 8 times their mean, so the "
               "pile comes out 8x the big-batch gradient: with SGD, a learning rate 8 times too big.",
        1 / 8: "1/b turns each summed loss into a mean, but then K = 4 means still add up: the pile is 4x too big.",
        1.0: "undivided, K = 4 sums of b = 8 losses add up to 32 times the mean: the pile is 32x too big.",
        1 / 128: "that divides by K twice (and by b once): the pile is 1/4 of the big-batch gradient.",
    }, f"with that factor the pile is {relative:.4g}x the big-batch gradient; it must be exactly 1x.")


def _audit_settings() -> list[tuple[str, dict]]:
    return [
        ("accumulation_steps = 4, 10 micro-batches (an uneven last group of 2)", dict(accumulation_steps=4, clip_norm=1.0)),
        ("accumulation_steps = 3 with a warmup scheduler", dict(accumulation_steps=3, with_scheduler=True, clip_norm=1.0)),
    ]


def _check_my_loop(answer: object) -> Feedback:
    wrong = needs_function(answer, "my_loop")
    if wrong:
        return wrong
    notes = []
    for setting, options in _audit_settings():
        report = audit_training_loop(answer, **options)
        steps = report.counts["optimizer.step()"][0]
        if report.mistakes == {"never_calls_backward"} and not steps:
            return not_attempted("your loop never calls backward or step: fill in its body")
        if not report.matches_reference:
            found = " ".join(report.findings)
            call = ", ".join(f"{k}={v}" for k, v in options.items())
            return incorrect(f"with {setting} the auditor found: {', '.join(sorted(report.mistakes))}. {found} "
                             f"For the full report: print(audit_training_loop(my_loop, {call})).")
        notes += report.notes
    # the auditor notes (rather than faults) a loop that returns no log
    unchecked = any("log" in n and "not checked" in n for n in notes)
    logged = "" if unchecked else " Its logged losses are the update means too."
    extra = " Return the mean loss of each update to have your logging checked as well." if not logged else ""
    return correct("the auditor ran your loop with K = 4 (uneven last group) and with K = 3 and a scheduler, "
                   "clipping at 1.0: "
                   f"every update matches the reference.{logged}{extra}")




def my_loop(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None) -> list[float]:
    """Worked answer: accumulation with an uneven last group, clipping and a scheduler; returns the log."""
    logged, update_losses = [], []
    for micro_step, (inputs, targets) in enumerate(batches):
        group_start = micro_step - micro_step % accumulation_steps
        group_size = min(accumulation_steps, len(batches) - group_start)  # fewer in the last group
        loss = loss_fn(model(inputs), targets)
        (loss / group_size).backward()  # equal micro-batches: each is 1/group_size of the update
        update_losses.append(loss.item())
        if is_update_step(micro_step, accumulation_steps, len(batches)):
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)  # once, on the completed pile
            optimizer.step()
            if scheduler is not None:
                scheduler.step()  # once per update, after the step
            optimizer.zero_grad(set_to_none=True)
            logged.append(sum(update_losses) / len(update_losses))
            update_losses = []
    return logged


def gallery_exercises() -> ExerciseSet:
    """The exercises of developer notebook 3 (the bug gallery)."""
    return ExerciseSet("The bug gallery", [
        Exercise(
            "sum_reduction", "Scale a summed loss",
            "Your loss is `torch.nn.MSELoss(reduction=\"sum\")`, micro_batch_size b = 8, accumulation_steps K = 4. "
            "By what factor must each micro-batch loss be multiplied so the pile equals the gradient of the big "
            "batch's *mean* loss? `ex.sum_reduction.check(factor)`.",
            _check_sum_reduction,
            ["With reduction='sum' each micro-batch loss is b times its mean.",
             "The K micro-batches still add up in .grad, as with a mean-reduced loss.",
             "Divide by the number of examples in the update: K x b."],
            "factor = 1 / (4 * 8)  # K x b: the update's examples",
            "A summed loss counts each example once; dividing by all K x b examples of the update makes it a mean.",
        ),
        Exercise(
            "my_loop", "Write your own loop",
            "Write `my_loop(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None)`: accumulate "
            "over `accumulation_steps` micro-batches per update, the uneven last group included; clip the gradient norm "
            "to 1.0 once per update; step the scheduler (when given) once per update; return the mean loss of each "
            "update. The loop auditor "
            "(`widgets.auditor.audit_training_loop`) checks it: `ex.my_loop.check(my_loop)`.",
            _check_my_loop,
            ["Start from the gallery's fixed loop and make sure each of its lines is there for a reason.",
             "The last group may hold fewer than K micro-batches: divide its losses by the number it really holds.",
             "clip_grad_norm_, step, scheduler.step and zero_grad all sit inside the one `if is_update_step(...)`, "
             "in that order; log the mean of the undivided losses of each update."],
            my_loop,
            "One boundary test; every per-update action inside it; each loss divided by its group's real size.",
        ),
    ])
