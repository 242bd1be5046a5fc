"""The auditor's checks: structure first, then the numbers the structure allows.

`read_structure` says what the loop did in micro-batch terms: which micro-batches each backward
pass carried, after which micro-batch each `optimizer.step()` came. The structural checks
(coverage, step positions, the pile at each backward pass) judge only that. The numeric checks
then read the factor on each micro-batch's loss off the gradient that reached its output, the
change `.grad` underwent between the last backward pass and each step, and the logged losses;
each is judged against what the right loop would do with the same micro-batches. Every check
returns its own findings; nothing is shared between them, so one mistake is named once.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import torch

from widgets.audit.instruments import UNSCALE_OP, Forward, Tape
from widgets.audit.mistakes import Finding
from widgets.audit.problems import Problem
from widgets.core.training import clip_flat

TOLERANCE = 1e-6  # relative: float64 ratios of the same sums agree to ~1e-12; this leaves room


def close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=TOLERANCE, abs_tol=1e-12)


class Proportion(NamedTuple):
    """v against e: the ratio (v's projection on e) and whether v is that multiple of e."""

    ratio: float
    exact: bool


def proportion(v: torch.Tensor, e: torch.Tensor) -> Proportion:
    """v = ratio * e? The ratio (the projection of v on e) and whether what is left is negligible."""
    v, e = v.reshape(-1), e.reshape(-1)
    ee = float(e @ e)
    if ee == 0:
        return Proportion(math.nan, bool(v.abs().max() == 0))
    ratio = float(v @ e) / ee
    return Proportion(ratio, float((v - ratio * e).norm()) <= TOLERANCE * (abs(ratio) + 1) * math.sqrt(ee))


def is_empty(pile: torch.Tensor | None) -> bool:
    return pile is None or bool(pile.abs().max() == 0)


# ----------------------------------------------------------------------------- the outcome


class GroupTruth(NamedTuple):
    """One update of the right loop at a given weight, by plain autograd: the gradient its step must
    use (flat, clipped like clip_grad_norm_), its mean loss, and its last micro-batch's mean loss."""

    grad: torch.Tensor
    mean_loss: float
    last_loss: float
    size: int  # micro-batches
    unclipped: torch.Tensor  # flat: the gradient before clipping


def group_truth(problem: Problem, weight: torch.Tensor, group: range) -> GroupTruth:
    w = weight.detach().clone().requires_grad_(True)
    sums = [problem.task.loss_fn(problem.task.forward(w, problem.batches[j][0]), problem.batches[j][1])
            * problem.items(j) for j in group]  # each mean loss times its items: the summed per-item loss
    total_items = sum(problem.items(j) for j in group)
    (grad,) = torch.autograd.grad(sum(sums) / total_items, w)
    grad = grad.reshape(-1)
    return GroupTruth(clip_flat(grad, problem.clip_norm), float(sum(sums).detach()) / total_items,
                      float(sums[-1].detach()) / problem.items(group[-1]), len(group), grad)


@dataclass(frozen=True)
class Outcome:
    """Did each optimizer.step() use the right gradient at the weight it started from? Judged on the
    steps alone, so a right loop passes however it builds the pile (a separate buffer, autograd.grad,
    torch.func, a rescaled .grad, a GradScaler)."""

    exact: bool
    ratios: list[float]  # per step: its gradient over the right one (only with one step per update)
    truths: list[GroupTruth]


def check_outcome(tape: Tape, problem: Problem) -> Outcome:
    if len(tape.steps) != len(problem.groups) or any(s.grad is None or s.weight is None for s in tape.steps):
        return Outcome(False, [], [])
    truths = [group_truth(problem, s.weight, g) for s, g in zip(tape.steps, problem.groups)]
    fits = [proportion(s.grad, t.grad) for s, t in zip(tape.steps, truths)]
    exact = all(f.exact and close(f.ratio, 1) for f in fits)
    if exact and problem.clip_norm is not None:  # a clip hides the pile's size: read it before the clip too
        for u, truth in enumerate(truths):
            before = _before_clip(tape, u, problem.clip_norm)
            if before is not None:
                fit = proportion(before, truth.unclipped)
                exact = exact and fit.exact and close(fit.ratio, 1)
    return Outcome(exact, [f.ratio for f in fits], truths)


def _before_clip(tape: Tape, u: int, clip_norm: float) -> torch.Tensor | None:
    """.grad just before the clip of step u (the last shrink to clip_norm before it), or None."""
    step = tape.steps[u]
    changes = [c.grad for c in tape.grad_changes if c.passes_before == step.passes_before and c.steps_before == u]
    for before, after in reversed(list(zip(changes, changes[1:]))):
        factor, proportional = proportion(after, before)
        if proportional and 0 < factor < 1 and not close(factor, 1) and close_norm(after, clip_norm):
            return before
    return None


# ----------------------------------------------------------------------------- structure


@dataclass(frozen=True)
class Structure:
    """What the loop did, in micro-batch terms, before any number is compared."""

    pass_batches: list[tuple[int | None, ...]]  # the micro-batch of each forward each backward pass went through
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

    @property
    def steps_at_boundaries(self) -> bool:
        return self.step_after == self.expected_after


def read_structure(tape: Tape, problem: Problem) -> Structure:
    pass_batches = [tuple(tape.forwards[k].batch for k in p.forwards) for p in tape.passes]
    times = [0] * len(problem.batches)
    for batches in pass_batches:
        for j in batches:
            if j is not None:
                times[j] += 1
    last = [max((j for j in batches if j is not None), default=-1) for batches in pass_batches]
    step_after = [last[s.passes_before - 1] if s.passes_before else -1 for s in tape.steps]
    expected = [max(j for j in g if times[j]) for g in problem.groups if any(times[j] for j in g)]
    segments, start = [], 0
    for s in tape.steps:
        segments.append([k for p in tape.passes[start : s.passes_before] for k in p.forwards])
        start = max(start, s.passes_before)
    return Structure(pass_batches, times, step_after, expected, segments)


def check_coverage(structure: Structure, problem: Problem) -> list[Finding]:
    """Did every micro-batch go through backward() once, one per backward pass?"""
    for k, batches in enumerate(structure.pass_batches):
        if not batches:
            return [Finding("unexpected_gradient", f"backward pass {k} reached the weight without going through "
                                                   "the model's output")]
        if None in batches:
            return [Finding("unexpected_gradient", f"backward pass {k} went through a forward pass on inputs that "
                                                   "are none of the micro-batches")]
    times, N, tail = structure.times_carried, len(problem.batches), problem.groups[-1]
    missing = [j for j in range(N) if not times[j]]
    twice = [j for j in range(N) if times[j] > 1]
    shared = [k for k, batches in enumerate(structure.pass_batches) if len(batches) > 1]
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


def check_steps(tape: Tape, structure: Structure, problem: Problem) -> list[Finding]:
    """Do the steps fall right after the last micro-batch of each update?"""
    positions, expected = structure.step_after, structure.expected_after
    seen = f"{len(positions)} steps, the reference {len(expected)}"
    n_tail = len(problem.groups[-1])
    if not positions:
        return [Finding("never_steps", "the weights never changed")]
    befores = [s.passes_before for s in tape.steps]
    doubled = [u for u in range(1, len(befores)) if befores[u] == befores[u - 1] and befores[u]]
    if doubled and sorted(set(positions)) == expected:
        amp = any(c.op == UNSCALE_OP for c in tape.grad_changes)  # the loop runs a GradScaler
        return [Finding("amp_step_twice" if amp else "step_twice",
                        f"{seen}: steps {doubled} came right after another step, with no backward() between")]
    if [s.passes_before for s in tape.steps] == list(range(1, len(tape.passes) + 1)) and len(positions) > len(expected):
        return [Finding("step_every_micro_step", f"{seen}, one per update of K = {problem.K} micro-batches")]
    if n_tail < problem.K and expected and positions == expected[:-1] and expected[-1] in problem.groups[-1]:
        return [Finding("forget_final_step", f"{seen}: none for the final group of {n_tail} micro-batch(es)")]
    if positions != expected:
        return [Finding("wrong_step_positions",
                        f"steps after micro-batches {positions}, the reference after {expected}")]
    return []


def check_piles(tape: Tape, structure: Structure, problem: Problem) -> list[Finding]:
    """What .grad held before each backward pass. An emptied pile is a mistake only where neither an
    update of the right loop nor one of the loop's own steps begins; a pile left full only where both do."""
    stepped_before = {s.passes_before for s in tape.steps}
    group = [min(batches) // problem.K for batches in structure.pass_batches]
    wiped, clipped, changed, leaked = [], [], [], []
    for k in range(1, len(tape.passes)):
        p, previous = tape.passes[k], tape.passes[k - 1]
        first = min(structure.pass_batches[k])
        update_begins, step_before = group[k] > group[k - 1], k in stepped_before
        if is_empty(p.before):
            if not update_begins and not step_before:
                wiped.append(first)
        elif update_begins and step_before:
            leaked.append(group[k])
        elif not torch.allclose(p.before, previous.after, rtol=TOLERANCE, atol=0):
            ratio, proportional = proportion(p.before, previous.after)
            (clipped if proportional and ratio < 1 else changed).append(first)
    findings = []
    if leaked:
        findings.append(Finding("zero_grad_missing", f"update {leaked[0]} began with the previous gradient in .grad"))
    if wiped:
        findings.append(Finding("zero_grad_every_micro_step", f".grad was found empty before micro-steps {wiped}"))
    if clipped:
        findings.append(Finding("clip_every_micro_step", f"the pile was shrunk before micro-steps {clipped}"))
    if changed:
        findings.append(Finding("grad_modified", f"before micro-steps {changed}"))
    return findings


# ----------------------------------------------------------------------------- numbers


def output_gradients(tape: Tape) -> list[tuple[int, torch.Tensor]]:
    """(forward index, the gradient its output received) for every forward a backward pass went through."""
    return [(k, g) for p in tape.passes for k, g in zip(p.forwards, p.output_grads)]


def check_backward_passes(tape: Tape, problem: Problem) -> list[Finding]:
    """Each backward pass added to .grad exactly what flows back from the outputs it went through
    (plain autograd through the same forward): nothing else was in the loss."""
    for k, p in enumerate(tape.passes):
        explained = sum(_pull_back(problem, tape.forwards[f], g) for f, g in zip(p.forwards, p.output_grads))
        if not torch.allclose(p.incoming, explained, rtol=TOLERANCE, atol=1e-12):
            return [Finding("unexpected_gradient", f"backward pass {k} brought the weight more than its "
                                                   "micro-batches' outputs explain: another term in the loss?")]
    return []


def _pull_back(problem: Problem, forward: Forward, output_grad: torch.Tensor) -> torch.Tensor:
    w = forward.weight.clone().requires_grad_(True)
    (grad,) = torch.autograd.grad(problem.task.forward(w, forward.inputs), w, output_grad)
    return grad.reshape(-1)


@dataclass(frozen=True)
class BoundaryCheck:
    """What happened to .grad between each update's last backward pass and its step."""

    findings: list[Finding]
    rescale: list[float]  # per step: the factor the pile was multiplied by (1: left alone or clipped)


def check_boundaries(tape: Tape, problem: Problem) -> BoundaryCheck:
    """Follow .grad from the last backward pass of each update to its step, one change at a time:
    a change by `_foreach_mul_` (how clip_grad_norm_ scales), or one that brings the norm to
    clip_norm, is a clip; any other factor rescales the pile (and so the losses, in effect)."""
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
        ops = [c.op for c in changes if not is_empty(c.grad)] + ["step"]
        clipped_to, modified = [], False
        for before, after, op in zip(states, states[1:], ops):
            factor, proportional = proportion(after, before)
            if not proportional or factor < 0:
                modified = True
                break
            if close(factor, 1):
                continue
            if op == "_foreach_mul_" or (clip is not None and factor < 1 and close_norm(after, clip)):
                clipped_to.append(float(after.norm()))
            else:
                rescale[-1] *= factor
        used_norm = float(step.grad.norm())
        if modified:
            findings.append(Finding("grad_modified", f".grad was changed after the last backward() of update {u}"))
        elif clip is not None and not clipped_to and used_norm > clip * (1 + TOLERANCE):
            findings.append(Finding("clip_missing", f"update {u} used norm {used_norm:.3g} > clip_norm = {clip:g}"))
        elif clipped_to and (clip is None or not close_norm(step.grad, clip)):
            findings.append(Finding("clip_norm_differs", f"update {u} was clipped to {clipped_to[-1]:.3g}, "
                                                         f"clip_norm is {clip}"))
    return BoundaryCheck(first_of_each(findings), rescale)


def check_amp(tape: Tape, problem: Problem) -> list[Finding]:
    """With a GradScaler, clipping must see the unscaled gradient: a clip (a `_foreach_mul_`, or a
    shrink to clip_norm) followed by the scaler's unscale in the same update clipped the scaled one."""
    for u, step in enumerate(tape.steps):
        changes = [c for c in tape.grad_changes if c.passes_before == step.passes_before and c.steps_before == u]
        clipped = False
        for before, change in zip(changes, changes[1:]):
            factor, proportional = proportion(change.grad, before.grad)
            if change.op == UNSCALE_OP and clipped:
                name = "amp_no_unscale" if change.in_scaler_step else "amp_clip_before_unscale"
                used = float(step.grad.norm()) if step.grad is not None else 0.0
                return [Finding(name, f"update {u} was clipped while scaled, then unscaled: it stepped with norm "
                                      f"{used:.3g}" + (f", clip_norm is {problem.clip_norm:g}"
                                                       if problem.clip_norm is not None else ""))]
            if proportional and 0 < factor < 1 and not close(factor, 1) and (
                    change.op == "_foreach_mul_" or (problem.clip_norm is not None
                                                    and close_norm(change.grad, problem.clip_norm))):
                clipped = True
    return []


def close_norm(grad: torch.Tensor, norm: float) -> bool:
    """Has `grad` the norm clip_grad_norm_ leaves (it divides by the norm + 1e-6)?"""
    return math.isclose(float(grad.norm()), norm, rel_tol=1e-5)


@dataclass(frozen=True)
class LossFactor:
    """The factor c on one micro-batch's summed per-item loss, as its backward pass carried it
    (times any rescaling of .grad before its step); None: the gradient at its output is no multiple
    of the summed per-item losses' (another loss)."""

    batch: int
    factor: float | None


def loss_factors(tape: Tape, structure: Structure, problem: Problem,
                 rescale: list[float]) -> dict[int, list[LossFactor]]:
    """Per update of the right loop, a LossFactor for each forward of it that a backward pass went through."""
    at_step = {k: rescale[s] for s, segment in enumerate(structure.segments) for k in segment}
    factors: dict[int, list[LossFactor]] = {}
    for k, g in output_gradients(tape):
        f = tape.forwards[k]
        c, exact = proportion(g, problem.task.item_sum_gradient(f.output, problem.batches[f.batch][1]))
        factor = c * at_step.get(k, 1.0) if exact else None
        factors.setdefault(f.batch // problem.K, []).append(LossFactor(f.batch, factor))
    return factors


def check_loss_scale(factors: dict[int, list[LossFactor]], problem: Problem) -> list[Finding]:
    """Name the factor on each micro-batch's loss, one update of the right loop at a time. A short
    final group can read two ways (divided twice by n = 2 is 1/4, as is 1/K for K = 4): the
    mistake the full groups showed is then the likelier reading and is tried right after the right one."""
    findings, full_groups_mistake = [], None
    for u in sorted(factors):
        g = problem.groups[u]
        unexplained = [f.batch for f in factors[u] if f.factor is None]
        if unexplained:
            seen = f"micro-batch {unexplained[0]}'s loss is no multiple of its summed {problem.task.per_item}: " \
                   "another loss, or targets out of order?"
            return findings + [Finding("unexpected_gradient", seen)]
        group_items = [problem.items(j) for j in g]
        readings = {f.batch: problem.task.readings(problem.items(f.batch), group_items, problem.K) for f in factors[u]}
        names = sorted(next(iter(readings.values())), key=lambda n: (n is not None, n != full_groups_mistake))
        def fits(name: str | None, seen: list[LossFactor] = factors[u], readings: dict = readings) -> bool:
            return all(any(close(f.factor, v) for v in readings[f.batch][name]) for f in seen)

        name = next((name for name in names if fits(name)), "wrong_loss_scale")
        if len(g) == problem.K:
            full_groups_mistake = name
        if name is not None:
            findings.append(Finding(name, problem.task.describe_factors(u, factors[u], dict(zip(g, group_items)))))
    return first_of_each(findings)


def update_ratios(tape: Tape, structure: Structure, problem: Problem) -> list[float]:
    """Each step's gradient over the right one at the same weights (only while the steps fall on the
    update boundaries and every micro-batch went through backward once: else there is no one right)."""
    if not structure.each_once or structure.step_after != structure.expected_after[: len(structure.step_after)]:
        return []
    ratios = []
    for step, segment, g in zip(tape.steps, structure.segments, problem.groups):
        window = sum(problem.items(j) for j in g)
        right = sum(_pull_back(problem, tape.forwards[k], problem.task.item_sum_gradient(
            tape.forwards[k].output, problem.batches[tape.forwards[k].batch][1])) for k in segment) / window
        used = torch.zeros_like(right) if step.grad is None else step.grad
        ratios.append(proportion(used, clip_flat(right, problem.clip_norm)).ratio)
    return ratios


def first_of_each(findings: list[Finding]) -> list[Finding]:
    seen, kept = set(), []
    for f in findings:
        if f.name not in seen:
            seen.add(f.name)
            kept.append(f)
    return kept


# ----------------------------------------------------------------------------- scheduler and log


def check_scheduler(tape: Tape, reference: Tape) -> list[Finding]:
    """One scheduler.step() right after each of the loop's own optimizer.step() calls."""
    calls, expected = len(tape.scheduler_calls), len(reference.scheduler_calls)
    rates = f"learning rates {[float(f'{s.lr:.3g}') for s in tape.steps[:4]]}, " \
            f"reference {[float(f'{s.lr:.3g}') for s in reference.steps[:4]]}"
    if calls == len(tape.passes) and calls > max(expected, len(tape.steps)):
        return [Finding("scheduler_every_micro_step", f"{calls} scheduler steps, the reference {expected}; {rates}")]
    if calls != len(tape.steps):
        return [Finding("scheduler_wrong_count", f"{calls} scheduler steps for {len(tape.steps)} optimizer steps; "
                                                 f"{rates}")]
    if any(done < i + 1 for i, done in enumerate(tape.scheduler_calls)):
        return [Finding("scheduler_before_step", rates)]
    return []


@dataclass(frozen=True)
class LogCheck:
    findings: list[Finding]
    notes: list[str]
    checked: bool  # a returned list of logged losses was compared with the true means


def check_log(log: list[float] | None, log_problem: str | None, tape: Tape, structure: Structure | None,
              problem: Problem, outcome: Outcome) -> LogCheck:
    """The loop's optional return value, the loss it logged at each update, against the true mean
    loss of each update: at the weights each step started from when the steps are right, else of
    each of the loop's own updates (or of the right loop's, when its steps fall elsewhere)."""
    if log_problem is not None:
        return LogCheck([Finding("bad_return_value", log_problem)], [], False)
    if log is None:
        return LogCheck([], ["logging not checked: the loop returned no list of logged losses"], False)
    if outcome.exact:
        readings = [[(t.mean_loss, t.last_loss, t.size) for t in outcome.truths]]
    elif structure is None or not structure.each_once:
        return LogCheck([], ["logging not checked: not every micro-batch went through backward() once"], False)
    else:
        readings = _own_means(tape, structure, problem)
    logged = log
    if any(len(r) == len(logged) and all(close(v, m) for v, (m, _, _) in zip(logged, r)) for r in readings):
        return LogCheck([], [], True)
    truth = next((r for r in readings if len(r) == len(logged)), None)
    if truth is None:
        return LogCheck([Finding("log_wrong", f"{len(logged)} values for {len(readings[0])} updates")], [], True)
    findings = []
    for u, (value, (mean, last, n)) in enumerate(zip(logged, truth)):
        seen = f"update {u} logged {value:.4g}, its mean loss is {mean:.4g}"
        if close(value, mean):
            continue
        if value != 0 and any(close(value, v) for v in (mean / n, mean / problem.K, last / n, last / problem.K)):
            findings.append(Finding("log_divided_loss", f"{seen}, {mean / value:.3g} x more"))
        elif close(value, last):
            findings.append(Finding("log_last_micro_batch", seen))
        else:
            findings.append(Finding("log_wrong", seen))
    return LogCheck(first_of_each(findings), [], True)


def _own_means(tape: Tape, structure: Structure, problem: Problem) -> list[list[tuple[float, float, int]]]:
    """(the true mean loss, the last micro-batch's mean, micro-batches) of each of the loop's own
    updates that piled something, and of the right loop's when the steps fall elsewhere."""
    task, batch_of = problem.task, [f.batch for f in tape.forwards]
    carried = {batch_of[k]: k for k, _ in output_gradients(tape)}

    def means(updates: list[list[int]]) -> list[tuple[float, float, int]]:
        out = []
        for batches in updates:
            if not batches:
                continue  # a step with nothing newly piled (a second step in a row) logs no update of its own
            sums = [task.item_loss_sum(tape.forwards[carried[j]].output, problem.batches[j][1]) for j in batches]
            items = [problem.items(j) for j in batches]
            out.append((sum(sums) / sum(items), sums[-1] / items[-1], len(batches)))
        return out

    own = means([sorted(batch_of[k] for k in segment) for segment in structure.segments])
    return [own] if structure.steps_at_boundaries else [own, means([list(g) for g in problem.groups])]
