"""Developer notebook 2's exercises (`loop_exercises`): each checker names the typical wrong answer by the numbers it gives."""
from __future__ import annotations

import random
from typing import Callable

import torch

from widgets.core.accumulation import flat_weights, is_update_step
from widgets.exercises.toolkit import Exercise, ExerciseSet, Feedback, as_number, as_numbers, close_to, correct
from widgets.exercises.toolkit import choice_checker, diagnose, incorrect, not_attempted, number_checker

_BOUNDARY_GRID = [(m, k, t) for k in range(1, 6) for t in range(1, 14) for m in range(t)]


def _random_boundary_cases(seed: int = 2, count: int = 300) -> list[tuple[int, int, int]]:
    """Seeded cases far outside the grid (K up to 10^6, up to 10^9 micro-steps): the same feedback on every run."""
    rng = random.Random(seed)
    cases = []
    for _ in range(count):
        k = int(10 ** rng.uniform(0, 6))
        t = int(10 ** rng.uniform(0, 9)) + 1
        j = rng.randrange(max(1, t // k) + 1)
        m = rng.choice([t - 1, j * k - 1, j * k, rng.randrange(t)])  # the last step, near a boundary, anywhere
        cases.append((min(max(m, 0), t - 1), k, t))
    return cases


_BOUNDARY_RANDOM = _random_boundary_cases()


def is_boundary(micro_step: int, accumulation_steps: int, total_micro_steps: int) -> bool:
    """Worked answer: does this micro-step (from 0) end an update?"""
    last = micro_step == total_micro_steps - 1  # the uneven tail still gets its update
    return (micro_step + 1) % accumulation_steps == 0 or last


def _check_boundary(answer: object) -> Feedback:
    got = {case: answer(*case) for case in _BOUNDARY_GRID}
    if all(v is None for v in got.values()):
        return not_attempted("your function returns None: fill in its body")
    got = {case: bool(v) for case, v in got.items()}
    right = all(got[c] == is_update_step(*c) for c in _BOUNDARY_GRID)
    if not right and all(got[(m, k, t)] == ((m + 1) % k == 0) for m, k, t in _BOUNDARY_GRID):
        return incorrect("right for full windows, but when total_micro_steps does not divide by K the last "
                         "micro-step (e.g. micro_step 9 of 10 with K = 4) never updates: the tail's gradient stays "
                         "in .grad, never applied. Also end an update when micro_step == total_micro_steps - 1.")
    off_by_one = {(m, k, t): m % k == 0 for m, k, t in _BOUNDARY_GRID}
    if not right and all(got[c] == (off_by_one[c] or c[0] == c[2] - 1) for c in _BOUNDARY_GRID) or got == off_by_one:
        return incorrect("your updates come at micro_step 0, K, 2K, ...: after the first micro-batch of each "
                         "window. micro_step counts from 0, so the K-th micro-batch is micro_step K - 1: "
                         "test (micro_step + 1) % accumulation_steps == 0.")
    for m, k, t in [*_BOUNDARY_GRID, *_BOUNDARY_RANDOM]:  # the grid, then cases no table of it holds
        value = got[(m, k, t)] if (m, k, t) in got else bool(answer(m, k, t))
        if value != is_update_step(m, k, t):
            return incorrect(f"for micro_step={m}, accumulation_steps={k}, total_micro_steps={t} it returns {value}, "
                             f"but that micro-step {'does not end' if value else 'ends'} an update.")
    return correct("every K-th micro-step ends an update, and so does the last one, uneven tail included.")


_TAIL_SIZES = (8, 8, 3)


def _check_tail_weights(answer: object) -> Feedback:
    weights = as_numbers(answer, "weights")
    if len(weights) != len(_TAIL_SIZES):
        return incorrect(f"give one weight per micro-batch of this window: {len(_TAIL_SIZES)} of them, got {len(weights)}")
    sum_w = sum(weights)
    if close_to(weights, [n / sum(_TAIL_SIZES) for n in _TAIL_SIZES]):
        return correct("each micro-batch counts by its share n_k / n of the window's 19 examples, so the pile is "
                       "the gradient of the window's mean loss, as if its 19 examples were one batch.")
    return diagnose(weights, {
        (1 / 4,) * 3: "that divides the tail by the configured K = 4: the weights sum to 0.75, so this update's "
                      "gradient comes out 0.75x the right size; the tail is under-weighted.",
        (1 / 3,) * 3: "these sum to 1, but equal weights give the 3-example micro-batch as much say as each "
                      "8-example one: its examples count 8/3 times as much as the others. Weight by size.",
        tuple(n / 32 for n in _TAIL_SIZES): "you divided by 32, the examples of a full update, but this window holds "
                                            f"only 19: your weights sum to {sum_w:.3g}, not 1.",
        tuple(float(n) for n in _TAIL_SIZES): "those are the micro-batch sizes themselves: divide each by the window's "
                                              "number of examples.",
    }, "your weights sum to 1 but are not proportional to the micro-batch sizes 8, 8 and 3." if close_to(sum_w, 1.0)
        else f"your weights sum to {sum_w:.4g}; the weights of one update must sum to 1, so that the pile is a mean "
             "over the window's examples.")


def update_loss(micro_losses: list[float], micro_batch_sizes: list[int]) -> float:
    """Worked answer: the mean loss over all the examples of one update."""
    total = sum(loss * n for loss, n in zip(micro_losses, micro_batch_sizes))
    return total / sum(micro_batch_sizes)


# Equal sizes, uneven sizes, and a third case the notebook never shows, so constant answers fail.
_LOSS_CASES = [([0.9, 0.5, 0.7, 0.3], [2, 2, 2, 2]), ([0.8, 0.6, 0.2], [8, 8, 3]), ([1.2, 0.4], [5, 1])]


def _random_loss_cases(seed: int = 3, count: int = 50) -> list[tuple[list[float], list[int]]]:
    """Seeded cases (1 to 16 micro-batches of 1 to 4096 examples, losses up to 100) no table of the three covers."""
    rng = random.Random(seed)
    cases = []
    for _ in range(count):
        k = rng.randint(1, 16)
        cases.append(([round(rng.uniform(0.0, 100.0), 4) for _ in range(k)], [rng.randint(1, 4096) for _ in range(k)]))
    return cases


_LOSS_RANDOM = _random_loss_cases()

# What a typical update_loss computes, and what to say when an answer computes exactly that (first match wins).
_UPDATE_LOSS_RULES: list[tuple[Callable[[list[float], list[int]], float], str]] = [
    (lambda ls, ns: ls[-1], "that is the last micro-batch's loss alone, what many tutorials print as "
     "`loss.item() * accumulation_steps` (the divided loss times K): one micro-batch's noise, not the update's mean."),
    (lambda ls, ns: ls[-1] * len(ls), "that is K times the last micro-batch's loss: these losses were never divided, "
     "so multiplying by K makes them K times too big, and one micro-batch is not the update anyway."),
    (lambda ls, ns: sum(ls) / len(ls) ** 2, "that is about K times too small: you logged the divided loss (loss / K), "
     "the number that goes into backward, instead of the mean loss."),
    (lambda ls, ns: ls[-1] / len(ls), "that is about K times too small: you logged the divided loss (loss / K), "
     "the number that goes into backward, instead of the mean loss."),
    (lambda ls, ns: sum(ls), "that is K times too big: a sum of K micro-batch means, not their mean."),
    (lambda ls, ns: sum(ls) / len(ls), "right when the micro-batches are all the same size (the first case, sizes "
     "[2, 2, 2, 2], passes), but for sizes [8, 8, 3] the plain mean over-counts the 3-example micro-batch: weight "
     "each loss by its size."),
    (lambda ls, ns: sum(l * n for l, n in zip(ls, ns)), "that is the total loss over the update's examples, "
     "not their mean: divide by how many examples there are."),
]


def _check_update_loss(answer: object) -> Feedback:
    results = [answer(list(losses), list(sizes)) for losses, sizes in _LOSS_CASES]
    if all(r is None for r in results):
        return not_attempted("your function returns None: fill in its body")
    got = [as_number(r, "update_loss(...)") for r in results]
    for rule, message in _UPDATE_LOSS_RULES:
        if all(close_to(g, rule(ls, ns)) for g, (ls, ns) in zip(got, _LOSS_CASES)):
            return incorrect(message)
    for losses, sizes in [*_LOSS_CASES, *_LOSS_RANDOM]:  # the three cases, then fresh ones
        value = as_number(answer(list(losses), list(sizes)), "update_loss(...)")
        if not close_to(value, update_loss(losses, sizes)):
            return incorrect(f"for losses {losses} and sizes {sizes} your function gives {value:.4g}; "
                             "the update's mean loss is the average over its examples.")
    return correct("the mean over the update's examples: each micro-batch mean counts by its size.")


_CLIP_MESSAGES = {
    "A": "(A) clips after every backward: each partial pile is cut to the full threshold, so the micro-batches "
         "that arrive early are clipped differently from the late ones and the update is not the clipped mean gradient.",
    "C": "(C) comes after optimizer.step(): the update has already used the unclipped pile, and zero_grad is about "
         "to throw away what you clipped. The clip does nothing.",
    "D": "(D) comes after zero_grad: the pile is gone (.grad is None), there is nothing left to clip.",
}


_check_clip_position = choice_checker(
    "B", _CLIP_MESSAGES, "clip once per update, on the completed pile, just before the step uses it.")
_check_warmup_end = number_checker(25, {
    100: "100 is when the warmup ends if the scheduler steps once per update, where it belongs; "
         "here it steps on every micro-step, K = 4 times per update.",
    400: "the scheduler runs K times per update, so the warmup is over sooner, not later.",
    4: "4 is K; the warmup is W = 100 scheduler steps, taken K at a time.",
}, "{value:g} updates is not it: count how many scheduler steps each update takes.",
    "scheduler.step() runs K = 4 times per update, so 100 scheduler steps are over after 25 updates.", "updates")


AMP_CALLS = ("backward", "unscale", "clip", "step", "update", "zero_grad")
AMP_EXPECTED = ["backward", "backward", "unscale", "clip", "step", "update", "zero_grad"]


def _normalise_call(call: object) -> str:
    return str(call).strip().lower().rstrip("()").rstrip("_").removeprefix("scaler.").removeprefix("optimizer.")


def _run_amp_calls(calls: list[str], updates: int = 3) -> torch.Tensor:
    """The final weights after playing `calls` as each of `updates` updates (K = 2) with a real CPU GradScaler."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(5)
        model = torch.nn.Linear(3, 1)
        data = torch.randn(2 * updates, 4, 3)
        target = 3 * torch.randn(2 * updates, 4, 1)  # gradients of norm > 1: the clip acts
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**10)
    actions = {
        "unscale": lambda: scaler.unscale_(optimizer),
        "clip": lambda: torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0),
        "step": lambda: scaler.step(optimizer),
        "update": scaler.update,
        "zero_grad": lambda: optimizer.zero_grad(set_to_none=True),
    }
    micro_batches = iter(zip(data, target))
    for _ in range(updates):
        for call in calls:
            if call == "backward":
                inputs, targets = next(micro_batches)
                scaler.scale(torch.nn.functional.mse_loss(model(inputs), targets) / 2).backward()
            else:
                actions[call]()
    return flat_weights(model)


def _index(calls: list[str], name: str) -> int:
    return calls.index(name) if name in calls else len(calls)


# Why an order is wrong, checked in this order; the first that applies is what the learner reads.
# Each predicate gets the normalised calls and the positions of the backward calls.
_AMP_RULES: list[tuple[Callable[[list[str], list[int]], bool], str]] = [
    (lambda c, b: len(b) != 2, "one update here has K = 2 micro-steps, so 'backward' comes twice, not {backwards} times."),
    (lambda c, b: c.count("unscale") > 1, "calling unscale_ twice before update() raises RuntimeError ('unscale_() has already "
     "been called on this optimizer since the last update()'): unscale once per update."),
    (lambda c, b: "unscale" not in c, "without unscale_ the clip compares the *scaled* gradient (scale x too big) with "
     "the threshold: unscale_ once, just before clipping."),
    (lambda c, b: c.index("unscale") < b[-1], "calling unscale_ before the last backward: that backward then adds scaled "
     "gradients to an unscaled pile. Unscale once the pile is complete."),
    (lambda c, b: "zero_grad" in c[b[0]:b[-1]], "a zero_grad between the micro-steps wipes the first micro-batch's "
     "gradient from the pile."),
    (lambda c, b: _index(c, "clip") < c.index("unscale"), "clipping before unscale_ compares the scaled gradient with "
     "the threshold: unscale first."),
    (lambda c, b: any(c.count(n) != 1 for n in ("clip", "step", "update")),
     "each of clip, step and update belongs exactly once per update; here: {counts}."),
    (lambda c, b: "zero_grad" not in c, "without zero_grad the next update starts from this update's pile: clear it "
     "once per update, after the step (or before the first backward)."),
    (lambda c, b: c.index("step") < c.index("clip"), "clipping after the step changes a gradient the update has "
     "already used."),
    (lambda c, b: c.index("update") < c.index("step"), "calling update() before step(): scaler.step must see this pile's "
     "inf/nan check with the scale the pile was built with; update the scale after stepping."),
    (lambda c, b: "zero_grad" in c[c.index("unscale"):c.index("step")], "a zero_grad between unscale_ and step empties "
     "the pile before the step can use it."),
]


def _check_amp_order(answer: object) -> Feedback:
    if isinstance(answer, str) or not isinstance(answer, (list, tuple)):
        return incorrect(f"pass a list of call names, e.g. ['backward', ...], got {type(answer).__name__}")
    calls = [_normalise_call(c) for c in answer]
    unknown = [c for c in calls if c not in AMP_CALLS]
    if unknown:
        return incorrect(f"unknown call name(s) {unknown}; use only {list(AMP_CALLS)}")
    backwards = [i for i, c in enumerate(calls) if c == "backward"]
    if len(backwards) == 2:  # playable: the real GradScaler is the judge of a valid order
        try:
            valid = torch.allclose(_run_amp_calls(calls), _run_amp_calls(AMP_EXPECTED), rtol=1e-6, atol=1e-7)
        except (RuntimeError, AssertionError):  # torch refuses the order; the rules below say why
            valid = False
        if valid:
            where = ("before the first backward, so each update starts from an empty pile"
                     if calls.index("zero_grad") < backwards[0] else "once the step has used the pile")
            return correct("the scale stays fixed while the pile builds; unscale_ once, clip the true gradient, step, "
                           f"then update the scale; you clear the pile {where}. Played for three updates with a real "
                           "GradScaler, it gives the weights of the reference order.")
    counts = ", ".join(f"{n} x{calls.count(n)}" for n in ("clip", "step", "update"))
    for rule, message in _AMP_RULES:
        if rule(calls, backwards):
            return incorrect(message.format(backwards=len(backwards), counts=counts))
    return incorrect("not a valid order: played with a real GradScaler it does not give the reference's weights. "
                     "The pile first, then unscale, clip, step, update; zero_grad before the pile or after the step.")


def loop_exercises() -> ExerciseSet:
    """The exercises of developer notebook 2 (the training loop)."""
    return ExerciseSet("The training loop", [
        Exercise(
            name="boundary", title="Name the boundary",
            prompt="Write `is_boundary(micro_step, accumulation_steps, total_micro_steps)` that returns True when this "
            "micro-step (counted from 0) ends an update, the last micro-step of an uneven tail included; "
            "check it with `ex.boundary.check(is_boundary)`.",
            checker=_check_boundary,
            hints=["micro_step counts from 0: with K = 4 the updates come after micro-steps 3, 7, 11, ...",
             "(micro_step + 1) % accumulation_steps == 0 handles full windows. What about the last micro-step "
             "when total_micro_steps does not divide by K?",
             "The last micro-step is number total_micro_steps - 1: it ends an update too, whatever K says."],
            solution=is_boundary,
            explanation="Every K-th micro-step ends an update, and so does the very last one.",
            kind="code",
        ),
        Exercise(
            name="amp_order", title="Mixed precision, in order",
            prompt=f"With a GradScaler, gradient clipping and accumulation_steps K = 2, list the calls of one update "
            f"in order, using the names {list(AMP_CALLS)} ('backward' stands for scaler.scale(loss).backward() "
            "and appears once per micro-step): `ex.amp_order.check([...])`.",
            checker=_check_amp_order,
            hints=["The scale must not change while the pile is building, and unscale_ may run only once per update.",
             "Clip the true (unscaled) gradient; step before update, because update changes the scale.",
             "The pile (two backwards) first; then unscale, clip and step in that order; update after the step; "
             "zero_grad where it cannot touch this pile before the step uses it."],
            solution="calls = ['backward', 'backward', 'unscale', 'clip', 'step', 'update', 'zero_grad']\n"
            "# zero_grad may also come first (before the pile) or between step and update",
            explanation="Build the pile at a fixed scale, then unscale once, clip, step, update the scale, clear.",
            kind="predict",
        ),
        Exercise(
            name="tail_weights", title="Weight the tail",
            prompt="accumulation_steps K = 4, micro_batch_size b = 8, and the data runs out: the last window holds "
            "micro-batches of 8, 8 and 3 examples. By what factor must each one's mean loss be multiplied so "
            "the pile equals the gradient of one batch of those 19 examples? "
            "`ex.tail_weights.check([w1, w2, w3])`.",
            checker=_check_tail_weights,
            hints=["Each micro-batch loss is a mean over its own examples. A mean over 19 examples weights each example 1/19.",
             "A micro-batch of n_k examples contributes n_k examples' worth: its weight is n_k / 19.",
             "The three weights sum to 1, and the 3-example micro-batch gets 3/8 of the weight of each 8-example one."],
            solution="""
            from widgets.core.accumulation import micro_batch_weights
            weights = micro_batch_weights([8, 8, 3])  # [8/19, 8/19, 3/19]
            """,
            explanation="Weight each micro-batch by its share of the window's examples.",
            kind="compute",
        ),
        Exercise(
            name="update_loss", title="Log the update's loss",
            prompt="Write `update_loss(micro_losses, micro_batch_sizes)`: given the undivided mean loss of each "
            "micro-batch of one update and their sizes, return the number to log for that update. "
            "`ex.update_loss.check(update_loss)` tries equal and uneven micro-batches.",
            checker=_check_update_loss,
            hints=["The number to log is the mean loss over all the examples of the update, the one a big batch would report.",
             "A micro-batch of n_k examples with mean loss L_k holds n_k * L_k of the total loss.",
             "Add up each micro-batch's share of the total loss, then divide by the number of examples in the update."],
            solution=update_loss,
            explanation="Weight each micro-batch's mean loss by its number of examples; with equal sizes this is the plain mean.",
            kind="code",
        ),
        Exercise(
            name="clip_position", title="Where does the clip go?",
            prompt="In the loop below, where does `torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)` "
            "belong? `ex.clip_position.check('A')` (or 'B', 'C', 'D').\n\n"
            "```python\nfor micro_step, (inputs, targets) in enumerate(batches):\n"
            "    (loss_fn(model(inputs), targets) / accumulation_steps).backward()\n    # (A)\n"
            "    if is_update_step(micro_step, accumulation_steps, len(batches)):\n        # (B)\n"
            "        optimizer.step()\n        # (C)\n        optimizer.zero_grad(set_to_none=True)\n        # (D)\n```",
            checker=_check_clip_position,
            hints=["Clipping should act on the gradient the update uses.",
             "That gradient exists only once the pile is complete, and only until zero_grad clears it.",
             "Inside the if, before optimizer.step(): (B)."],
            solution="""
            if is_update_step(micro_step, accumulation_steps, len(batches)):
                torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)  # (B): the completed pile
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
            """,
            explanation="(B): once per update, on the completed pile, before the step.",
            kind="predict",
        ),
        Exercise(
            name="warmup_end", title="When does the warmup end?",
            prompt="A linear warmup is written for W = 100 updates, accumulation_steps K = 4, and `scheduler.step()` "
            "is called on every micro-step. After how many updates is the warmup over? "
            "`ex.warmup_end.check(number)`.",
            checker=_check_warmup_end,
            hints=["The scheduler counts its own step() calls, not updates.",
             "Each update takes K micro-steps, and each micro-step calls scheduler.step().",
             "So W = 100 scheduler steps are used up K = 4 at a time."],
            solution="warmup_end = 100 // 4  # 25 updates: the schedule runs K times too fast",
            explanation="The scheduler runs K = 4 times per update, so W = 100 of its steps take 25 updates.",
            kind="predict",
        ),
    ])
