"""Developer notebook 3's exercises (`gallery_exercises`): both loops judged by the loop auditor, so the two never disagree."""
from __future__ import annotations

import torch

from widgets.audit import audit_training_loop
from widgets.core.accumulation import is_update_step
from widgets.exercises.toolkit import Exercise, ExerciseSet, Feedback, as_number, close_to, correct, diagnose
from widgets.exercises.toolkit import incorrect, not_attempted


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


# The audits a loop must pass, the prompt's settings: the auditor is the one judge. The second ends on a
# window of two micro-batches, one short: a loop that divides by their number instead of n_i/n fails there.
AUDITS = ({"accumulation_steps": 4, "clip_norm": 1.0},
          {"accumulation_steps": 3, "num_batches": 8, "with_scheduler": True, "clip_norm": 1.0})
# Step 1 asks for accumulation alone: the same windows, no clipping, no scheduler.
ACCUMULATE_AUDITS = ({"accumulation_steps": 4}, {"accumulation_steps": 3, "num_batches": 8})


def _setting(options: dict) -> str:
    call = ", ".join(f"{k}={v}" for k, v in options.items())
    return f"audit_training_loop(my_loop, {call})"


def _audit_checker(audits: tuple[dict, ...], asked: str):
    """A checker that runs the auditor on the learner's loop in each of `audits`; `asked`: what a right loop did."""
    def check(answer: object) -> Feedback:
        reports = []
        for options in audits:
            try:
                report = audit_training_loop(answer, **options)
            except (TypeError, ValueError) as error:  # the auditor could not call it: a wrong signature
                return incorrect(f"the auditor could not run your loop: {error}")
            yours = {name: mine for name, (mine, _) in report.counts.items()}
            idle = not any(yours.get(name) for name in ("backward passes", "optimizer.step()", "zero_grad()"))
            if idle and not report.mistakes & {"loop_raised", "time_limit"}:
                return not_attempted("your loop never calls backward() or steps the optimizer: fill in its body")
            if report.mistakes:
                return incorrect(f"the auditor (`{_setting(options)}`) found:\n"  # one finding a line
                                 + "\n".join(f"- {finding}" for finding in report.findings))
            if not report.log_checked:
                return incorrect(f"the auditor (`{_setting(options)}`) found the updates right, but your loop returns "
                                 "nothing: the exercise asks it to return the mean loss of each update (a list, one "
                                 "number per update)")
            reports.append(report)
        runs = "; ".join(f"K = {r.accumulation_steps}, {r.num_batches} micro-batches of {r.micro_batch_size} examples"
                         for r in reports)
        return correct(f"the auditor ran your loop {len(reports)} times ({runs}; the last window short) and found it "
                       f"right each time: {asked}")
    return check


_check_accumulate = _audit_checker(
    ACCUMULATE_AUDITS, "each update used the gradient of the mean loss over its examples (micro-batch i weighted "
    "by its share n_i/n), one step per window, and the log holds each update's mean loss.")
_check_my_loop = _audit_checker(
    AUDITS, "each update used the gradient of the mean loss over its examples (micro-batch i weighted by its share "
    "n_i/n), clipped once; the scheduler stepped once per update; and the log holds each update's mean loss.")


def accumulating_loop(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None) -> list[float]:
    """Worked answer to step 1: the plain loop made to accumulate, a short last window included."""
    batches, K, logged = list(batches), accumulation_steps, []
    for micro_step, (inputs, targets) in enumerate(batches):
        if micro_step % K == 0:  # a window opens: count its examples (the last may hold fewer)
            n = sum(len(t) for _, t in batches[micro_step : micro_step + K])
            update_loss = 0.0
        loss = loss_fn(model(inputs), targets)
        share = len(targets) / n  # this micro-batch's share of the window's examples
        (loss * share).backward()  # .grad adds up to the gradient of the window's mean loss
        update_loss += loss.item() * share
        if (micro_step + 1) % K == 0 or micro_step == len(batches) - 1:  # the window ends
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            logged.append(update_loss)
    return logged


def my_loop(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None) -> list[float]:
    """Worked answer: accumulation with an uneven last window, clipping and a scheduler; returns the log."""
    logged, update_loss = [], 0.0
    for micro_step, (inputs, targets) in enumerate(batches):
        if micro_step % accumulation_steps == 0:  # a window starts: count its examples (fewer in the last window)
            update_examples = sum(len(t) for _, t in batches[micro_step : micro_step + accumulation_steps])
        loss = loss_fn(model(inputs), targets)  # the mean over this micro-batch's examples
        share = len(targets) / update_examples  # n_i / n; micro-batches of equal size: 1 / (their number)
        (loss * share).backward()  # .grad adds up the gradient of the update's mean loss
        update_loss = update_loss + loss.detach() * share  # the same weights make the update's mean loss
        if is_update_step(micro_step, accumulation_steps, len(batches)):
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)  # once, on the completed pile
            optimizer.step()
            if scheduler is not None:
                scheduler.step()  # once per update, after the step
            optimizer.zero_grad(set_to_none=True)
            logged.append(float(update_loss))  # one sync with the device per update, not per micro-step
            update_loss = 0.0
    return logged


def gallery_exercises() -> ExerciseSet:
    """The exercises of developer notebook 3 (the bug gallery)."""
    return ExerciseSet("The bug gallery", [
        Exercise(
            name="sum_reduction", title="Scale a summed loss",
            prompt="Your loss is `torch.nn.MSELoss(reduction=\"sum\")`, micro_batch_size b = 8, accumulation_steps K = 4. "
            "By what factor must each micro-batch loss be multiplied so the pile equals the gradient of the big "
            "batch's *mean* loss? `ex.sum_reduction.check(factor)`.",
            checker=_check_sum_reduction,
            hints=["With reduction='sum' each micro-batch loss is b times its mean.",
             "The K micro-batches still add up in .grad, as with a mean-reduced loss.",
             "A summed loss is already the total over its examples; the pile must end as a mean over the update's."],
            solution="factor = 1 / (4 * 8)  # K x b: the update's examples",
            explanation="A summed loss counts each example once; dividing by all K x b examples of the update makes it a mean.",
            kind="compute",
        ),
        Exercise(
            name="accumulate", title="Step 1: make a plain loop accumulate",
            prompt="The loop in the cell below takes one step per micro-batch, as a loop without accumulation does. Change "
            "it so that it makes one update per `accumulation_steps` micro-batches, the short last window included, "
            "and returns the mean loss of each update over its examples. `ex.accumulate.check(my_loop)` runs the loop "
            "auditor on it, exactly `audit_training_loop(my_loop, 4)` and `audit_training_loop(my_loop, 3, "
            "num_batches=8)`, and says what it found.",
            checker=_check_accumulate,
            hints=["backward() adds into .grad: keep it for every micro-batch, and step and clear only when a window ends.",
             "A window ends on every K-th micro-step and on the last one; its micro-batches may be fewer, and the "
             "last of them shorter.",
             "Weight each micro-batch's mean loss by its share n_i/n of the window's examples, counted when the "
             "window opens; log the same weighted sum."],
            solution=accumulating_loop,
            function="my_loop",
            explanation="One `if` that asks whether the window ends; step and zero_grad inside it; each micro-batch weighted by "
            "its share of the window's examples, for the gradient and for the log alike.",
            kind="code",
        ),
        Exercise(
            name="my_loop", title="Step 2: clip and schedule",
            prompt="Step 2: take your loop of step 1 and add what a real run needs: clip the gradient norm to 1.0 once per "
            "update, and step the scheduler (when given) once per update. `ex.my_loop.check(my_loop)` runs the loop "
            "auditor on it twice, exactly `audit_training_loop(my_loop, 4, clip_norm=1.0)` and "
            "`audit_training_loop(my_loop, 3, num_batches=8, with_scheduler=True, clip_norm=1.0)`, each with a short "
            "last window, and says what the auditor found.",
            checker=_check_my_loop,
            hints=["Each update's gradient must be that of the mean loss over the update's examples; each micro-batch "
             "counts by its share n_i/n of them (with equal sizes, 1 / the number of micro-batches).",
             "The last window may hold fewer micro-batches, and its last micro-batch fewer examples: count the examples "
             "of the window when it starts, or scale .grad once at the update (before clipping).",
             "clip_grad_norm_, step, scheduler.step and zero_grad all sit inside the one `if is_update_step(...)`, "
             "in that order; the log weights the undivided losses by the same shares."],
            solution=my_loop,
            explanation="One boundary test; every per-update action inside it; each micro-batch weighted by its share n_i/n of "
            "the update's examples, for the gradient and for the log alike.",
            kind="code",
        ),
    ])
