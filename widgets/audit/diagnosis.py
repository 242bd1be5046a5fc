"""Which mistake, for a loop whose updates came out wrong: the structure first, then the numbers it allows."""
from __future__ import annotations

import math
from collections import Counter
from typing import NamedTuple

import torch

from widgets.audit.instruments import UNSCALE_OP, Tape
from widgets.audit.outcome import (TOLERANCE, Finding, carried, close, close_norm, first_of_each, is_clip, is_empty,
                                   proportion, window_truth)
from widgets.audit.problems import Problem

_allclose = torch.allclose  # bound at import: a loop that replaces torch.allclose changes no verdict


class Structure(NamedTuple):
    """What the loop did, in micro-batch terms, before any number is compared."""

    pass_batches: list[tuple[int | None, ...]]  # the micro-batches of the forwards each backward pass went through
    times_carried: list[int]  # per micro-batch: how many forwards of it a backward pass went through
    step_after: list[int]  # per step: the last micro-batch carried before it (-1: none)
    expected_after: list[int]  # the same for the right loop, over the micro-batches the loop carried
    segments: list[list[int]]  # per step: the forwards (indices into tape.forwards) of the passes since the last

    @property
    def recognised(self) -> bool:
        return all(p and None not in p for p in self.pass_batches)

    @property
    def each_once(self) -> bool:
        return all(n == 1 for n in self.times_carried) and all(len(p) == 1 for p in self.pass_batches)


def read_structure(tape: Tape, problem: Problem) -> Structure:
    pass_batches = [tuple(dict.fromkeys(j for k in p.forwards for j in tape.forwards[k].micro_batches))
                    for p in tape.passes]  # two forwards of one micro-batch (R-Drop) carry it once
    carried = Counter(j for batches in pass_batches for j in batches)
    times = [carried[j] for j in range(len(problem.batches))]
    last = [max((j for j in batches if j is not None), default=-1) for batches in pass_batches]
    step_after = [last[s.passes_before - 1] if s.passes_before else -1 for s in tape.steps]
    expected = [max(j for j in w if times[j]) for w in problem.windows if any(times[j] for j in w)]
    segments, start = [], 0
    for s in tape.steps:
        segments.append([k for p in tape.passes[start : s.passes_before] for k in p.forwards])
        start = max(start, s.passes_before)
    return Structure(pass_batches, times, step_after, expected, segments)


def check_coverage(tape: Tape, structure: Structure, problem: Problem) -> list[Finding]:
    """Did every micro-batch go through backward() once, one per backward pass?"""
    for k, batches in enumerate(structure.pass_batches):
        if not batches:
            return [Finding("unexpected_gradient", f"backward pass {k} reached the weight without going through "
                                                   "the model's output")]
        if None in batches:
            return [Finding("unexpected_gradient", f"backward pass {k} went through a forward pass on inputs that "
                                                   "are none of the micro-batches")]
    times, N, tail = structure.times_carried, len(problem.batches), problem.windows[-1]
    missing = [j for j in range(N) if not times[j]]
    twice = [j for j in range(N) if times[j] > 1]
    shared = [k for k, batches in enumerate(structure.pass_batches)  # a window in one forward is named apart
              if len(batches) > 1 and len(tape.passes[k].forwards) > 1]
    if missing == list(tail) and len(tail) < problem.K and not twice and not shared:
        return [Finding("tail_dropped", f"{N - len(tail)} of {N} batches went through backward()")]
    seen = [f"{len(structure.pass_batches)} backward passes for {N} batches"]
    if missing:
        seen.append(f"micro-batches {missing} never went through backward()")
    if twice:
        seen.append(f"micro-batches {twice} went through it more than once")
    if shared:
        seen.append(f"backward passes {shared} each carried several micro-batches")
    return [Finding("backward_count", "; ".join(seen))] if len(seen) > 1 else []


def check_hooks(tape: Tape) -> list[Finding]:
    """Did the loop's own hooks on the weight pile up, one more at each backward pass?"""
    counts = [p.hooks for p in tape.passes]
    if len(counts) > 2 and counts[-1] > counts[0] and all(b >= a for a, b in zip(counts, counts[1:])):
        return [Finding("hook_never_removed", f"the weight carried {counts[0]} hook(s) of your loop at the first "
                                              f"backward(), {counts[-1]} at the last")]
    return []


def check_windows(tape: Tape, problem: Problem) -> list[Finding]:
    """Did a backward pass go through one forward of a whole window (torch.cat), holding all its activations?"""
    for k, p in enumerate(tape.passes):
        for f in (tape.forwards[i] for i in p.forwards):
            if f.window:
                return [Finding("window_in_one_pass", f"backward pass {k} went through one forward of micro-batches "
                                f"{list(f.window)} concatenated, {len(f.inputs)} {problem.task.unit} at once where "
                                f"a micro-batch holds {problem.b} (K = {problem.K})")]
    return []


def check_syncs(tape: Tape) -> tuple[list[Finding], list[str]]:
    """DDP form: was each update's pile averaged over the ranks (a backward() outside no_sync()), and once?"""
    syncs, start = [], 0
    for s in tape.steps:
        if s.passes_before > start:  # a step with backward passes of its own since the last one
            syncs.append(sum(start <= k < s.passes_before for k in tape.synced_passes))
        start = max(start, s.passes_before)
    never = [u for u, n in enumerate(syncs) if n == 0]
    if never:
        return [Finding("no_sync_every_micro_step", f"update {never[0]} stepped with this rank's own pile: every "
                                                    "backward() of its window ran inside no_sync()")], []
    most = max(syncs, default=1)
    return [], [f"{most} all-reduces in an update where 1 does: each backward() outside no_sync() averages the "
                "pile over the ranks; wrap every micro-step but the window's last in model.no_sync()"] \
        if most > 1 else []


def check_steps(tape: Tape, structure: Structure, problem: Problem) -> list[Finding]:
    """Do the steps fall right after the last micro-batch of each update?"""
    positions, expected = structure.step_after, structure.expected_after
    seen = f"{len(positions)} steps, the reference {len(expected)}"
    n_tail = len(problem.windows[-1])
    if not positions:
        return [Finding("never_steps", "the weights never changed")]
    befores = [s.passes_before for s in tape.steps]
    doubled = [u for u in range(1, len(befores)) if befores[u] == befores[u - 1] and befores[u]]
    if doubled and sorted(set(positions)) == expected:
        gradscaler = any(c.op == UNSCALE_OP for c in tape.grad_changes)
        emptied = all(is_empty(tape.steps[u].grad) for u in doubled)
        return [Finding("amp_step_twice" if gradscaler else "step_twice",
                        f"{seen}: steps {doubled} came right after another, "
                        + ("on a pile emptied by zero_grad(): plain SGD moves nothing there, momentum and Adam move "
                           "the weights again" if emptied else "applying the same pile again"))]
    if [s.passes_before for s in tape.steps] == list(range(1, len(tape.passes) + 1)) and len(positions) > len(expected):
        return [Finding("step_every_micro_step", f"{seen}, one per update of K = {problem.K} micro-batches")]
    if n_tail < problem.K and expected and positions == expected[:-1] and expected[-1] in problem.windows[-1]:
        return [Finding("forget_final_step", f"{seen}: none for the final window of {n_tail} micro-batch(es)")]
    if positions != expected:
        return [Finding("wrong_step_positions",
                        f"steps after micro-batches {positions}, the reference after {expected}")]
    return []


def _clipped_before(tape: Tape, k: int, steps_before: int, problem: Problem) -> bool:
    """Was the pile clipped between backward passes k - 1 and k?"""
    norm_read = any(c.after_norm for c in tape.grad_changes if (c.passes_before, c.steps_before) == (k, steps_before))
    return is_clip(tape.passes[k - 1].after, tape.passes[k].before, norm_read, problem.clip_norm)


def check_piles(tape: Tape, structure: Structure, problem: Problem) -> list[Finding]:
    """What .grad held before each backward pass: emptied where no update begins, full where one does, clipped
    or changed inside an update. A proportional rescale that is no clip builds the pile (a running mean):
    `pile_multipliers` reads it into the loss factors."""
    steps_so_far = [sum(s.passes_before <= k for s in tape.steps) for k in range(len(tape.passes))]
    stepped_before = {s.passes_before for s in tape.steps}
    window = [min(batches) // problem.K for batches in structure.pass_batches]
    wiped, clipped, changed, leaked = [], [], [], []
    for k in range(1, len(tape.passes)):
        p, previous = tape.passes[k], tape.passes[k - 1]
        first = min(structure.pass_batches[k])
        update_begins, step_before = window[k] > window[k - 1], k in stepped_before
        if is_empty(p.before):
            if not update_begins and not step_before:
                wiped.append(first)
        elif update_begins and step_before:
            leaked.append(window[k])
        elif not _allclose(p.before, previous.after, rtol=TOLERANCE, atol=0):
            ratio, proportional = proportion(p.before, previous.after)
            if not proportional or ratio <= 0:
                changed.append(first)
            elif _clipped_before(tape, k, steps_so_far[k], problem):
                clipped.append(first)
    findings = []
    if leaked:
        findings.append(Finding("zero_grad_missing", f"update {leaked[0]} began with the previous gradient in .grad"))
    if wiped:
        findings.append(Finding("zero_grad_every_micro_step", f".grad was found empty before micro-steps {wiped}"))
    if clipped:
        findings.append(Finding("clip_every_micro_step", f"the pile was clipped before micro-steps {clipped}"))
    if changed:
        findings.append(Finding("grad_modified", f"before micro-steps {changed}"))
    return findings


def pile_multipliers(tape: Tape, structure: Structure, problem: Problem, rescale: list[float]) -> dict[int, float]:
    """Per forward a backward pass went through: what its gradient was multiplied by from the model's output to
    the step, read where it landed: the loop's hooks on the weight, then each proportional rescale of the pile
    after it that is no clip (a running mean), then the step's own rescale (`rescale`)."""
    multipliers = {}
    for s, segment in enumerate(structure.segments):
        ks = [k for k in range(len(tape.passes)) if set(tape.passes[k].forwards) & set(segment)]
        later = rescale[s] if s < len(rescale) else 1.0
        for k in reversed(ks):
            p = tape.passes[k]
            landed = proportion(p.landed, p.incoming)
            for f in p.forwards:
                multipliers[f] = landed.ratio * later if landed.exact else math.nan
            if k > 0 and k - 1 in ks and not is_empty(p.before) and not is_empty(tape.passes[k - 1].after):
                ratio, proportional = proportion(p.before, tape.passes[k - 1].after)
                clip = _clipped_before(tape, k, s, problem)  # named by check_piles
                later *= ratio if proportional and ratio > 0 and not clip else 1.0
    return multipliers


def check_backward_passes(tape: Tape, problem: Problem) -> list[Finding]:
    """Each backward pass added to .grad exactly what flows back from the outputs it went through."""
    for k, p in enumerate(tape.passes):
        explained = 0
        for f, g in zip(p.forwards, p.output_grads):  # plain autograd through the same forward
            w = tape.forwards[f].weight.clone().requires_grad_(True)
            explained += torch.autograd.grad(problem.forward(w, tape.forwards[f].inputs), w, g)[0].reshape(-1)
        if not _allclose(p.incoming, explained, rtol=TOLERANCE, atol=1e-12):
            return [Finding("unexpected_gradient", f"backward pass {k} brought the weight more than its "
                                                   "micro-batches' outputs explain: another term in the loss?")]
    return []


class BoundaryCheck(NamedTuple):
    """What happened to .grad between each update's last backward pass and its step."""

    findings: list[Finding]
    rescale: list[float]  # per step: the factor the pile was multiplied by (1: left alone or clipped)


def check_boundaries(tape: Tape, problem: Problem) -> BoundaryCheck:
    """.grad from each update's last backward pass to its step: a shrink after a norm was read (clip_grad_norm_) or a
    shrink to clip_norm is a clip, any other factor a rescale of the pile."""
    findings, rescale, clip = [], [], problem.clip_norm
    for u, step in enumerate(tape.steps):
        pile = tape.passes[step.passes_before - 1].after if step.passes_before else None
        rescale.append(1.0)
        if is_empty(pile):
            continue  # a step with nothing piled: the structure says why
        if is_empty(step.grad):
            findings.append(Finding("zero_grad_before_step", f"update {u} stepped with an empty .grad"))
            continue
        changes = [c for c in tape.grad_changes if c.passes_before == step.passes_before and c.steps_before == u]
        states = [pile] + [c.grad for c in changes if not is_empty(c.grad)] + [step.grad]
        ops = [c.after_norm for c in changes if not is_empty(c.grad)] + [False]
        clipped_to, modified = [], False
        for before, after, after_norm in zip(states, states[1:], ops):
            factor, proportional = proportion(after, before)
            if not proportional or factor < 0:
                modified = True
                break
            if close(factor, 1):
                continue
            if is_clip(before, after, after_norm, clip):
                clipped_to.append(float(after.norm()))
            else:
                rescale[-1] *= factor
        used_norm = float(step.grad.norm())
        if modified and any(c.op in _CLAMPS for c in changes):
            findings.append(Finding("clip_by_value", f"update {u}'s pile was clamped entry by entry before its step"))
        elif modified:
            findings.append(Finding("grad_modified", f".grad was changed after the last backward() of update {u}"))
        elif clip is not None and not clipped_to and used_norm > clip * (1 + TOLERANCE):
            findings.append(Finding("clip_missing", f"update {u} used norm {used_norm:.3g} > clip_norm = {clip:g}"))
        elif clipped_to and (clip is None or not close_norm(step.grad, clip)):
            findings.append(Finding("clip_norm_differs", f"update {u} was clipped to {clipped_to[-1]:.3g}, "
                                                         f"clip_norm is {clip}"))
    return BoundaryCheck(first_of_each(findings), rescale)


def check_amp(tape: Tape, problem: Problem) -> list[Finding]:
    """With a GradScaler, a clip followed by the scaler's unscale in the same update clipped the scaled gradient."""
    for u, step in enumerate(tape.steps):
        changes = [c for c in tape.grad_changes if c.passes_before == step.passes_before and c.steps_before == u]
        clipped = False
        for before, change in zip(changes, changes[1:]):
            if change.op == UNSCALE_OP and clipped:
                name = "amp_no_unscale" if change.in_scaler_step else "amp_clip_before_unscale"
                used = float(step.grad.norm()) if step.grad is not None else 0.0
                return [Finding(name, f"update {u} was clipped while scaled, then unscaled: it stepped with norm "
                                      f"{used:.3g}" + (f", clip_norm is {problem.clip_norm:g}"
                                                       if problem.clip_norm is not None else ""))]
            clipped |= is_clip(before.grad, change.grad, change.after_norm, problem.clip_norm)
    return []


class LossFactor(NamedTuple):
    """The factor c on one micro-batch's summed per-item loss, times any rescaling of .grad before its step."""

    batch: int
    factor: float | None  # None: its output's gradient is no multiple of the summed per-item losses' one
    shape: str | None = None  # the mistake whose loss shape the gradient fits instead (problem.task.shapes)
    forward: int = -1  # the forward it was read from
    hooked: bool = False  # a hook of the loop changed its gradient on the weight into no multiple of autograd's


def loss_factors(tape: Tape, structure: Structure, problem: Problem,
                 rescale: list[float]) -> dict[int, list[LossFactor]]:
    """Per update of the right loop, a LossFactor for each forward of it that a backward pass went through."""
    at_step = pile_multipliers(tape, structure, problem, rescale)
    factors: dict[int, list[LossFactor]] = {}
    for part in carried(tape, problem):
        j = part.batch
        targets = problem.batches[j][1]
        summed = problem.item_sum_gradient(part.output, targets)
        c, exact = proportion(part.grad, summed)
        multiplier = at_step.get(part.forward, 1.0)
        hooked = math.isnan(multiplier)
        factor = c * multiplier if exact and not hooked else None
        shape = None if exact else next((name for name, reweigh in getattr(problem.task, "shapes", {}).items()
                                         if proportion(part.grad, reweigh(summed, targets)).exact), None)
        update = factors.setdefault(j // problem.K, [])
        twice = next((i for i, f in enumerate(update) if f.batch == j and f.forward != part.forward
                      and _equal_outputs(tape, f, part)), None)
        if twice is None:
            update.append(LossFactor(j, factor, shape, part.forward, hooked))
        else:  # two forwards of one micro-batch at one weight (R-Drop): one loss on it, their factors add
            f = update[twice]
            update[twice] = f._replace(factor=None if f.factor is None or factor is None else f.factor + factor)
    return factors


def _equal_outputs(tape: Tape, factor: "LossFactor", part) -> bool:
    a, b = tape.forwards[factor.forward], tape.forwards[part.forward]
    return _allclose(a.weight, b.weight, rtol=0, atol=0) and _allclose(a.output, b.output, rtol=TOLERANCE, atol=0)


def check_loss_scale(factors: dict[int, list[LossFactor]], problem: Problem, steps: int) -> list[Finding]:
    """Name the factor on each micro-batch's loss, one update of the right loop at a time, of the first `steps`
    (a window the loop never stepped on made no update to speak of)."""
    factors = {u: f for u, f in factors.items() if u < steps}
    shaped = next(((u, f) for u in sorted(factors) for f in factors[u] if f.shape is not None), None)
    if shaped is not None:  # another loss than a multiple of the summed per-item losses (GRPO's per-sequence mean)
        u, f = shaped  # a micro-batch whose completions have one length fits both: the others tell
        return [Finding(f.shape, problem.task.describe_shape(u, f.batch, problem.batches[f.batch][1]))]
    findings, full_windows_mistake, full_windows_multiple = [], None, None
    for u in sorted(factors):
        window = problem.windows[u]
        hooked = [f.batch for f in factors[u] if f.hooked]
        if hooked:
            return findings + [Finding("unexpected_gradient", f"micro-batch {hooked[0]}'s gradient reached .grad "
                                                              "changed by "
                                                        "a hook of your loop into no multiple of the one backward() "
                                                        "computed", "let a hook only scale the gradient (g * s), or "
                                                        "scale the loss instead")]
        unexplained = [f.batch for f in factors[u] if f.factor is None]
        if unexplained:
            seen = f"micro-batch {unexplained[0]}'s loss is no multiple of its summed {problem.task.per_item}: " \
                   "another loss, or targets out of order?"
            return findings + [Finding("unexpected_gradient", seen)]
        window_items = [problem.items(j) for j in window]
        readings = {f.batch: problem.readings(f.batch) for f in factors[u]}
        multiples = [f.factor / readings[f.batch][None][0] for f in factors[u]]  # each factor / the right one
        if len(window) < problem.K and full_windows_multiple is not None and \
                all(close(m, full_windows_multiple) for m in multiples):
            # the same multiple of the right weights as the full windows: their mistake, even where the short
            # window's sizes also fit another (R-Drop's two summed losses, 2 x, on a last micro-batch of 2)
            name = full_windows_mistake
        else:
            # a short final window can read two ways (1/n^2 for n = 2 is 1/K for K = 4): the right reading
            # first, then the mistake the full windows showed, the likelier one
            names = sorted(next(iter(readings.values())), key=lambda n: (n is not None, n != full_windows_mistake))
            name = next((name for name in names if all(any(close(f.factor, v) for v in readings[f.batch][name])
                                                       for f in factors[u])), "wrong_loss_scale")
        if len(window) == problem.K:
            full_windows_mistake = name
            full_windows_multiple = multiples[0] if all(close(m, multiples[0]) for m in multiples) else None
        if name is not None:
            findings.append(Finding(name, problem.describe(u, factors[u], dict(zip(window, window_items))),
                                    problem.fix_for(name)))
    return first_of_each(findings)


def grad_is_the_pile(tape: Tape) -> bool:
    """Did each step use what backward() piled in .grad (rescaled, clipped or not), or a pile the loop built
    itself (a buffer, torch.autograd.grad, torch.func) and put in .grad?"""
    if not tape.passes:
        return False
    for u, step in enumerate(tape.steps):
        pile = tape.passes[step.passes_before - 1].after if step.passes_before else None
        if is_empty(pile) or is_empty(step.grad) or any(
                c.op in _CLAMPS for c in tape.grad_changes if (c.passes_before, c.steps_before) == (step.passes_before, u)):
            continue  # nothing piled, nothing used, or a clip by value: the boundaries tell
        ratio, proportional = proportion(step.grad, pile)
        if not proportional or ratio <= 0:
            return False
    return True


_CLAMPS = ("clamp_", "clamp", "clip_", "_foreach_clamp_min_", "_foreach_clamp_max_", "clip_grad_value_")


def _fits(grad: torch.Tensor, pile: torch.Tensor) -> bool:
    fit = proportion(grad, pile)
    return fit.exact and close(fit.ratio, 1)


def check_built_piles(tape: Tape, problem: Problem) -> list[Finding]:
    """A pile the loop built itself: each step's gradient against the pile each loss scale would leave for its
    window at the weights it stepped from, then against its last micro-batch alone and the previous pile carried."""
    names_seen, previous = None, None
    for u, (step, window) in enumerate(zip(tape.steps, problem.windows)):
        if is_empty(step.grad):
            continue
        sums = problem.item_sum_gradients(step.weight, window)
        readings = [problem.readings(j) for j in window]
        piles = {name: [sum(r[name][i] * g for r, g in zip(readings, sums)) for i in range(len(readings[0][name]))]
                 for name in sorted(readings[0], key=lambda n: (n is not None, n != names_seen))}
        name = next((n for n, options in piles.items() if any(_fits(step.grad, v) for v in options)), False)
        if name is False and len(window) > 1 and _fits(step.grad, readings[-1][None][0] * sums[-1]):
            return [Finding("zero_grad_every_micro_step", f"update {u} stepped with micro-batch {window[-1]}'s "
                                                          "gradient alone", "add each micro-batch's gradient to your "
                                                          "pile; replace or empty it only after optimizer.step()")]
        if name is False and previous is not None and _fits(step.grad, previous + piles[None][0]):
            return [Finding("zero_grad_missing", f"update {u} stepped with the previous update's pile still in it",
                            "empty your own pile after each optimizer.step(), as zero_grad() empties .grad")]
        if name is False:
            return [Finding("grad_modified", f"update {u} stepped with a gradient that weighs its micro-batches "
                                             "in no way the auditor knows", "pile each micro-batch's gradient times "
                                             "its share n_i/n of the window, and step with that pile")]
        if len(window) == problem.K:
            names_seen = name
        if name is not None:
            factors = [LossFactor(j, r[name][0]) for j, r in zip(window, readings)]
            return [Finding(name, problem.describe(u, factors, {j: problem.items(j) for j in window}),
                            problem.fix_for(name))]
        previous = step.grad
    return []


def update_ratios(tape: Tape, structure: Structure, problem: Problem) -> list[float]:
    """Each step's gradient over the right one at the same weights, while the steps fall where the right ones do."""
    if not structure.each_once or structure.step_after != structure.expected_after[: len(structure.step_after)]:
        return []
    ratios = []
    for step, window in zip(tape.steps, problem.windows):
        right = window_truth(problem, step.weight, window).grad
        ratios.append(proportion(torch.zeros_like(right) if step.grad is None else step.grad, right).ratio)
    return ratios
