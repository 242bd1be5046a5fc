"""Developer notebook 3 (the bug gallery): its exercises, each checker saying what is wrong.

    from widgets.exercises.developer import gallery_exercises
    ex = gallery_exercises()
    ex.my_loop.check(my_loop)     # runs the loop auditor on it

`my_loop` is checked by `widgets.audit.auditor.audit_training_loop` in two settings; the worked
answer `my_loop` lives here as real code: `solution()` shows its source.
"""
from __future__ import annotations

import torch

from widgets.core.accumulation import is_update_step
from widgets.audit.auditor import audit_training_loop
from widgets.exercises.toolkit import Exercise, ExerciseSet, Feedback, as_number, close_to, correct, diagnose
from widgets.exercises.toolkit import incorrect, needs_function, not_attempted


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
    log_checked = True
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
        log_checked = log_checked and report.log_checked  # a loop that returns no log is not a mistake
    logged = " Its logged losses are the update means too." if log_checked else ""
    extra = "" if log_checked else " Return the mean loss of each update to have your logging checked as well."
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
            "(`widgets.audit.auditor.audit_training_loop`) checks it: `ex.my_loop.check(my_loop)`.",
            _check_my_loop,
            ["Start from the gallery's fixed loop and make sure each of its lines is there for a reason.",
             "The last group may hold fewer than K micro-batches: divide its losses by the number it really holds.",
             "clip_grad_norm_, step, scheduler.step and zero_grad all sit inside the one `if is_update_step(...)`, "
             "in that order; log the mean of the undivided losses of each update."],
            my_loop,
            "One boundary test; every per-update action inside it; each loss divided by its group's real size.",
        ),
    ])
