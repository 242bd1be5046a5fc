"""The auditor's judgement of what a loop produced: each step's gradient at its weights, the log, the schedule."""
from __future__ import annotations

import math
from math import isclose  # bound at import: a loop that replaces math.isclose changes no verdict
from typing import TYPE_CHECKING, NamedTuple

import torch

from widgets.audit.instruments import MOST_RECORDED, Tape
from widgets.audit.problems import Problem
from widgets.core.mistakes import EVERY_MISTAKE
from widgets.core.training import clip_flat

if TYPE_CHECKING:
    from widgets.audit.diagnosis import Structure

TOLERANCE = 1e-6  # relative: float64 ratios of the same sums agree to ~1e-12; this leaves room


class Finding(NamedTuple):
    """One mistake seen: its name (a key of EVERY_MISTAKE), what was seen, and a fix of the problem's own."""

    name: str
    seen: str
    fix: str | None = None

    def sentence(self) -> str:
        """'What is wrong (what was seen). Fix: the fix.', code kept in its own case (optimizer.step())."""
        mistake = EVERY_MISTAKE[self.name]
        what = mistake.does
        if "(" not in what.split()[0] and not what.startswith("."):
            what = what[0].upper() + what[1:]
        return f"{what} ({self.seen}). Fix: {self.fix or mistake.fix}."


def close(a: float, b: float) -> bool:
    return isclose(a, b, rel_tol=TOLERANCE, abs_tol=1e-12)


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


def close_norm(grad: torch.Tensor, norm: float) -> bool:
    """Has `grad` the norm clip_grad_norm_ leaves (it divides by the norm + 1e-6)?"""
    return isclose(float(grad.norm()), norm, rel_tol=1e-5)


def is_clip(before: torch.Tensor, after: torch.Tensor, norm_read: bool, clip_norm: float | None) -> bool:
    """Did .grad go from `before` to `after` by a clip: a shrink after its norm was read (clip_grad_norm_ reads it
    first), or a shrink to the audit's clip_norm? Any other shrink is no clip (a running mean rescales too)."""
    factor, proportional = proportion(after, before)
    return proportional and 0 < factor < 1 and not close(factor, 1) and (
        norm_read or (clip_norm is not None and close_norm(after, clip_norm)))


def first_of_each(findings: list[Finding]) -> list[Finding]:
    kept: dict[str, Finding] = {}
    for f in findings:
        kept.setdefault(f.name, f)
    return list(kept.values())


class Part(NamedTuple):
    """One micro-batch's rows of a forward a backward pass went through (a window in one pass has several)."""

    forward: int
    batch: int | None
    output: torch.Tensor
    grad: torch.Tensor


def carried(tape: Tape, problem: Problem) -> list[Part]:
    """Every micro-batch's part of every forward a backward pass went through, in the passes' order."""
    parts = []
    for p in tape.passes:
        for k, g in zip(p.forwards, p.output_grads):
            f, row = tape.forwards[k], 0
            for j in f.micro_batches:
                rows = len(problem.batches[j][0]) if j is not None and f.window else len(f.output)
                parts.append(Part(k, j, f.output[row : row + rows], g[row : row + rows]))
                row += rows
    return parts


class LogTruth(NamedTuple):
    """What one update may log: its mean loss (micro-batch means weighted n_i/n), and the usual wrong logs."""

    mean: float
    plain: float
    last: float
    divided: tuple[float, ...]

    @classmethod
    def of(cls, losses: list[float], shares: list[float], K: int) -> "LogTruth":
        mean, n = sum(l * s for l, s in zip(losses, shares)), len(losses)
        twice = sum(l * s * s for l, s in zip(losses, shares))  # each part of the mean divided again by n/n_i
        return cls(mean, sum(losses) / n, losses[-1], (mean / n, mean / K, losses[-1] / n, losses[-1] / K, twice))


class WindowTruth(NamedTuple):
    """One update of the right loop at a given weight, by plain autograd."""

    grad: torch.Tensor  # flat: what its step must use, clipped like clip_grad_norm_
    log: LogTruth  # what its log may read
    unclipped: torch.Tensor  # flat: the gradient before clipping


def window_truth(problem: Problem, weight: torch.Tensor, window: range) -> WindowTruth:
    if problem.synced is not None:  # a DDP rank steps with the ranks' mean: the window of every rank together
        return window_truth(problem.synced, weight, problem.synced.windows[window.start // problem.K])
    w = weight.detach().clone().requires_grad_(True)
    means = [problem.task.loss_fn(problem.forward(w, problem.batches[j][0]), problem.batches[j][1])
             for j in window]
    items = [problem.items(j) for j in window]
    summed = sum(m * n for m, n in zip(means, items))  # the summed per-item loss of the window
    grad = torch.autograd.grad(summed * problem.right_factor(window.start // problem.K), w)[0].reshape(-1)
    log = LogTruth.of([float(m.detach()) for m in means], [n / sum(items) for n in items], problem.K)
    return WindowTruth(clip_flat(grad, problem.clip_norm), log, grad)


class Outcome(NamedTuple):
    """Did each optimizer.step() use the right gradient at its weight? (However the loop built the pile.)"""

    exact: bool
    ratios: list[float]  # per step: its gradient over the right one (only with one step per update)
    truths: list[WindowTruth]


def check_outcome(tape: Tape, problem: Problem) -> Outcome:
    if len(tape.steps) != len(problem.windows) or any(s.grad is None for s in tape.steps):
        return Outcome(False, [], [])
    truths = [window_truth(problem, s.weight, w) for s, w in zip(tape.steps, problem.windows)]
    fits = [proportion(s.grad, t.grad) for s, t in zip(tape.steps, truths)]
    exact = all(f.exact and close(f.ratio, 1) for f in fits)
    if exact and problem.clip_norm is not None:  # a clip hides the pile's size: read it before the clip too
        for u, (s, truth) in enumerate(zip(tape.steps, truths)):
            changes = [c for c in tape.grad_changes if (c.passes_before, c.steps_before) == (s.passes_before, u)]
            for before, after in reversed(list(zip(changes, changes[1:]))):  # the last clip
                if is_clip(before.grad, after.grad, after.after_norm, problem.clip_norm):
                    fit = proportion(before.grad, truth.unclipped)
                    exact = exact and fit.exact and close(fit.ratio, 1)
                    break
    return Outcome(exact, [f.ratio for f in fits], truths)


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


class LogCheck(NamedTuple):
    findings: list[Finding]
    notes: list[str]
    checked: bool  # a returned list of logged losses was compared with the true means


def check_log(log: list[float] | None, log_problem: str | None, tape: Tape, structure: Structure | None,
              problem: Problem, outcome: Outcome) -> LogCheck:
    """The loss the loop logged at each update (its optional return value) against each update's true mean loss."""
    if log_problem is not None:
        return LogCheck([Finding("bad_return_value", log_problem)], [], False)
    if log is None:
        return LogCheck([], ["logging not checked: the loop returned no list of logged losses"], False)
    if outcome.exact:
        readings = [[t.log for t in outcome.truths]]
    elif structure is None or not structure.each_once:
        return LogCheck([], ["logging not checked: not every micro-batch went through backward() once"], False)
    else:
        readings = _own_means(tape, structure, problem)
    if any(len(r) == len(log) and all(close(v, t.mean) for v, t in zip(log, r)) for r in readings):
        return LogCheck([], [], True)
    truth = next((r for r in readings if len(r) == len(log)), None)
    if truth is None:
        logged = f"{len(log)} values" + (" or more" if len(log) >= MOST_RECORDED else "")  # an endless iterator ends
        return LogCheck([Finding("log_wrong", f"{logged} for {len(readings[0])} updates")], [], True)
    findings = []
    for u, (value, t) in enumerate(zip(log, truth)):
        seen = f"update {u} logged {value:.4g}, its mean loss is {t.mean:.4g}"
        if close(value, t.mean):
            continue
        if value != 0 and any(close(value, v) for v in t.divided):
            findings.append(Finding("log_divided_loss", f"{seen}, {t.mean / value:.3g} x more"))
        elif close(value, t.plain):
            findings.append(Finding("log_plain_mean", f"{seen}, the plain mean of its micro-batch means "
                                                      f"{t.plain:.4g}"))
        elif close(value, t.last):
            findings.append(Finding("log_last_micro_batch", seen))
        else:
            findings.append(Finding("log_wrong", seen))
    return LogCheck(first_of_each(findings), [], True)


def _own_means(tape: Tape, structure: Structure, problem: Problem) -> list[list[LogTruth]]:
    """The log readings of the loop's own updates, and of the right loop's when the steps fall elsewhere."""
    output_of = {part.batch: part.output for part in carried(tape, problem)}
    batch_of = [f.batch for f in tape.forwards]

    def truths(updates: list[list[int]]) -> list[LogTruth]:
        out = []
        for batches in updates:
            if not batches:
                continue  # a step with nothing newly piled (a second step in a row) logs no update of its own
            items = [problem.items(j) for j in batches]
            losses = [float(problem.task.loss_fn(output_of[j], problem.batches[j][1])) for j in batches]
            out.append(LogTruth.of(losses, [n / sum(items) for n in items], problem.K))
        return out

    own = truths([sorted(batch_of[k] for k in segment) for segment in structure.segments])
    steps_at_boundaries = structure.step_after == structure.expected_after
    return [own] if steps_at_boundaries else [own, truths([list(w) for w in problem.windows])]
