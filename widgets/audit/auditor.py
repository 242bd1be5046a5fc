"""The loop auditor: run a learner's accumulation loop on a tiny problem and say what differs.

    def my_loop(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None): ...
    audit_training_loop(my_loop, accumulation_steps=4)   # prints as a plain-words report

The loop is watched from outside, nothing is bound behind the learner's back: hooks on the
model's single weight see every backward pass (what it added to `.grad`, what `.grad` held
before), the optimizer keeps the gradient and learning rate of each `step()` and counts
`zero_grad()`, the scheduler counts its steps; those instruments live in
`widgets.audit.instruments`, and this module reads what they recorded. The correct loop runs
on the same problem as the reference. Mistakes are named with the `widgets.core.config.BUGS` names
where one applies; the others are listed in `AUDIT_MISTAKES`. Float64 throughout, so every
ratio is exact to ~1e-12.
"""
from __future__ import annotations

import inspect
import math
from dataclasses import dataclass, field
from typing import Callable

import torch

from widgets.audit.instruments import (
    LEARNING_RATE,
    Problem,
    Tape,
    make_problem,
    reference_loop,
    run_loop,
    true_gradient,
)
from widgets.core.config import check_float, check_int
from widgets.core.training import clip_flat

__all__ = ["AUDIT_MISTAKES", "LEARNING_RATE", "AuditReport", "audit_training_loop"]

# Every mistake the auditor can name: (what is wrong, the fix). BUGS names where one applies.
_MISTAKES: dict[str, tuple[str, str]] = {
    "loss_not_divided": ("each micro-batch's loss reaches backward() undivided: every update is K x too big",
                         "divide each loss by accumulation_steps before backward()"),
    "loss_divided_twice": ("each micro-batch's loss is divided by K twice: every update is 1/K of the reference",
                           "divide once"),
    "loss_sum_reduction": ("the loss sums over the b examples of a micro-batch (reduction='sum'): updates b x too big",
                           "use the mean, or divide the summed loss by all the examples of the update"),
    "wrong_loss_scale": ("the micro-batch losses are scaled by a factor other than 1/K",
                         "multiply each mean loss by 1/K (1/n in a final group of n)"),
    "tail_divided_by_k": ("the uneven final group is divided by K, not by its own size: its update is too small",
                          "divide the final group's losses by its number of micro-batches"),
    "tail_dropped": ("the uneven final group never goes through backward(): its examples never count",
                     "run every batch; step after the last one too"),
    "zero_grad_every_micro_step": ("zero_grad() empties the pile inside an update: it keeps only the last micro-batch",
                                   "call zero_grad() only after optimizer.step()"),
    "zero_grad_missing": ("the pile is not emptied after a step: gradients leak into the next update",
                          "call zero_grad() after each optimizer.step()"),
    "step_every_micro_step": ("optimizer.step() runs after every micro-step", "step only when an update is complete"),
    "forget_final_step": ("the uneven final group never gets its optimizer.step(): its gradient is thrown away",
                          "also step on the last micro-step, e.g. with is_update_step(i, K, len(batches))"),
    "wrong_step_positions": ("optimizer.step() runs elsewhere than at the update boundaries",
                             "step after every K-th micro-step and after the last one"),
    "never_steps": ("optimizer.step() is never called", "call optimizer.step() once per update"),
    "clip_every_micro_step": ("clipping runs on the half-built pile inside an update",
                              "clip once per update, after the last backward() and just before optimizer.step()"),
    "clip_missing": ("a step used an unclipped gradient although clip_norm was given",
                     "clip once per update, just before optimizer.step()"),
    "clip_norm_differs": ("the loop clips to another norm than the audit's clip_norm",
                          "pass the max_norm your loop clips with as clip_norm"),
    "scheduler_every_micro_step": ("scheduler.step() runs every micro-step: the warmup ends K x too soon",
                                   "step the scheduler once per update, right after optimizer.step()"),
    "scheduler_wrong_count": ("scheduler.step() does not run once per optimizer.step()",
                              "step the scheduler once per update, right after optimizer.step()"),
    "scheduler_before_step": ("scheduler.step() runs before optimizer.step(): the first learning rate is skipped",
                              "call it right after optimizer.step()"),
    "log_divided_loss": ("the logged loss is the divided one",
                         "log loss.item() before dividing, averaged over the update"),
    "log_last_micro_batch": ("the logged loss is the last micro-batch's, not the update's mean",
                             "average the loss over the update's micro-batches"),
    "log_wrong": ("the logged losses are not the mean loss of each update", "return one mean loss per update"),
    "bad_return_value": ("the loop returned something other than a list of numbers",
                         "return a list with one logged loss per update, or nothing"),
    "never_calls_backward": ("no backward() pass reached the model", "call loss.backward() on each micro-batch's loss"),
    "backward_count": ("backward() did not run once per batch", "call backward() once per micro-batch"),
    "grad_modified": (".grad was changed between backward passes inside an update", "leave .grad alone until the step"),
    "unexpected_gradient": ("a gradient matches none of the known mistakes",
                            "compare your loop line by line with the pattern"),
    "differs_from_reference": ("the final weights differ from the reference for a reason not named here",
                               "compare your loop line by line with the pattern"),
    "loop_raised": ("the loop raised an exception", "fix the line named"),
}
AUDIT_MISTAKES: dict[str, str] = {name: what for name, (what, _) in _MISTAKES.items()}
_SCALES = {"loss_not_divided", "loss_divided_twice", "loss_sum_reduction", "wrong_loss_scale", "tail_divided_by_k"}
_TOL = 1e-6  # relative: float64 ratios of the same sums agree to ~1e-12; this leaves room


@dataclass(frozen=True)
class AuditReport:
    """What `audit_training_loop` found. `counts[name] = (yours, reference)`; `update_ratios[u]` is
    the gradient `optimizer.step()` used at update u over the reference gradient at the same weights;
    `log_checked` is True when the loop returned a list of logged losses that was compared with the
    true mean loss of each update (a wrong log is then among the mistakes)."""

    loop_name: str
    accumulation_steps: int
    num_batches: int
    micro_batch_size: int
    mistakes: frozenset[str]
    findings: list[str]
    notes: list[str] = field(default_factory=list)
    counts: dict[str, tuple[int, int]] = field(default_factory=dict)
    update_ratios: list[float] = field(default_factory=list)
    log_checked: bool = False

    @property
    def matches_reference(self) -> bool:
        return not self.mistakes

    def __str__(self) -> str:
        K, N = self.accumulation_steps, self.num_batches
        tail = N % K
        lines = [
            f"Audit of {self.loop_name} with accumulation_steps = {K}: {N} micro-batches of {self.micro_batch_size} "
            f"examples -> {-(-N // K)} updates" + (f" (the last of {tail} micro-batches)" if tail else ""),
            f"  {'':22}{'yours':>8}{'reference':>11}",
        ]
        for name, (yours, ref) in self.counts.items():
            lines.append(f"  {name:22}{yours:>8}{ref:>11}")
        if self.update_ratios:
            lines.append("  gradient / reference at each update: " + ", ".join(f"{r:.3g}" for r in self.update_ratios))
        if self.matches_reference:
            lines.append("Verdict: matches the reference.")
        else:
            lines.append("Verdict: differs from the reference. Mistakes: " + ", ".join(sorted(self.mistakes)))
        lines += [f"  - {f}" for f in self.findings] + [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)

    __repr__ = __str__

    def _repr_pretty_(self, printer, cycle) -> None:
        printer.text(str(self))


# ----------------------------------------------------------------------------- the analysis


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=_TOL, abs_tol=1e-12)


def _fit(v: torch.Tensor, e: torch.Tensor) -> tuple[float, bool]:
    """v = ratio * e? Returns the ratio (projection) and whether the rest is negligible."""
    ee = float(e @ e)
    if ee == 0:
        return math.nan, bool(v.abs().max() == 0)
    ratio = float(v @ e) / ee
    return ratio, float((v - ratio * e).norm()) <= _TOL * (abs(ratio) + 1) * math.sqrt(ee)


def _is_empty(pile: torch.Tensor | None) -> bool:
    return pile is None or bool(pile.abs().max() == 0)


def _loss_scale_mistake(a: float, n: int, K: int, b: int, before: str | None = None) -> str | None:
    """Name the per-micro-batch loss factor `a` in a group of n micro-batches (correct: 1/n).

    A short final group can be ambiguous (divided twice by n = 2 is 1/4, as is 1/K for K = 4):
    `before`, the mistake the full groups showed, is then the likelier reading and is tried first.
    """
    candidates = [
        (None, [1 / n]),
        ("tail_divided_by_k", [1 / K] if n < K else []),
        ("loss_not_divided", [1.0]),
        ("loss_divided_twice", [1 / K**2, 1 / n**2, 1 / (n * K)]),
        ("loss_sum_reduction", [b / n, b / K, float(b)]),
    ]
    candidates.sort(key=lambda c: c[0] != before)
    for name, values in candidates:
        if any(_close(a, v) for v in values):
            return name
    return "wrong_loss_scale"


def _say(out: dict[str, str], name: str, seen: str) -> None:
    """Record mistake `name` with what was seen; the first sighting of each mistake is kept."""
    what, fix = _MISTAKES[name]
    if "(" not in what.split()[0] and not what.startswith("."):  # code keeps its case: optimizer.step()
        what = what[0].upper() + what[1:]
    out.setdefault(name, f"{what} ({seen}). Fix: {fix}.")


def _check_piles(tape: Tape, p: Problem, out: dict) -> None:
    """What .grad held before each backward pass: empty at an update's start, the pile inside it."""
    starts = {g.start: u for u, g in enumerate(p.groups)}
    wiped, clipped, changed = [], [], []
    for j in range(1, min(len(tape.before), len(p.batches))):
        before, previous = tape.before[j], tape.after[j - 1]
        if j in starts:
            if not _is_empty(before):
                _say(out, "zero_grad_missing", f"update {starts[j]} began with the previous gradient in .grad")
        elif _is_empty(before):
            wiped.append(j)
        elif not torch.allclose(before, previous, rtol=_TOL, atol=0):
            ratio, proportional = _fit(before, previous)
            (clipped if proportional and ratio < 1 else changed).append(j)
    if wiped:
        _say(out, "zero_grad_every_micro_step", f".grad was found empty before micro-steps {wiped}")
    if clipped:
        _say(out, "clip_every_micro_step", f"the pile was shrunk before micro-steps {clipped}")
    if changed:
        _say(out, "grad_modified", f"before micro-steps {changed}")


def _check_steps(tape: Tape, p: Problem, out: dict) -> None:
    # groups whose batches never went through backward are reported as dropped, not as missing steps
    positions, expected = [s[0] for s in tape.steps], [g.stop for g in p.groups if g.stop <= len(tape.incoming)]
    seen = f"{len(positions)} steps, the reference {len(expected)}"
    n_tail = len(p.groups[-1])
    if not positions:
        _say(out, "never_steps", "the weights never changed")
    elif positions == list(range(1, len(tape.incoming) + 1)) and len(positions) > len(expected):
        _say(out, "step_every_micro_step", f"{seen}, one per update of K = {p.K} micro-batches")
    elif n_tail < p.K and positions == expected[:-1]:
        _say(out, "forget_final_step", f"{seen}: none for the final group of {n_tail} micro-batch(es)")
    elif positions != expected:
        _say(out, "wrong_step_positions", f"steps after backward passes {positions}, the reference after {expected}")


def _check_loss_scale(tape: Tape, truth: list, p: Problem, out: dict) -> None:
    """The factor each micro-batch's mean loss was multiplied by, read off the gradient it added."""
    full_groups_mistake = None
    for u, g in enumerate(p.groups):
        if g.stop > len(tape.incoming):
            break
        fits = [_fit(tape.incoming[j], truth[j][0]) for j in g]
        if not all(exact for _, exact in fits):
            _say(out, "unexpected_gradient", f"a micro-batch of update {u} added a gradient that is no multiple of "
                 "its mean loss's gradient: another loss, or batches out of order?")
            return
        factors = [a for a, _ in fits]
        a, n = factors[0], len(g)
        if not all(_close(f, a) for f in factors):
            _say(out, "wrong_loss_scale", f"update {u} scaled its losses by {[float(f'{f:.3g}') for f in factors]}")
            continue
        name = _loss_scale_mistake(a, n, p.K, p.b, before=full_groups_mistake)
        if n == p.K:
            full_groups_mistake = name
        if name is not None:
            _say(out, name, f"each loss of update {u} was multiplied by {_fraction(a)}, not 1/{n}; "
                 f"its gradient came out {a * n:.3g} x the reference")


def _fraction(a: float) -> str:
    """0.0625 as '1/16', 1.25 as '1.25'."""
    return f"1/{round(1 / a)}" if 0 < a < 1 and _close(1 / a, round(1 / a)) else f"{a:.4g}"


def _check_updates(tape: Tape, truth: list, p: Problem, out: dict, ratios: list[float]) -> bool:
    """The gradient each step used, against the reference gradient at the same weights (only when
    steps fall on update boundaries: with steps inside an update there is no one reference).
    Returns whether every update was exactly the reference's."""
    positions = [s[0] for s in tape.steps]
    if len(set(positions)) < len(positions) or not set(positions) <= {g.stop for g in p.groups}:
        return False
    all_right = len(positions) == len(p.groups)
    groups = {g.stop: g for g in p.groups}
    for u, (at, grad, _) in enumerate(tape.steps):
        g, pile = groups[at], tape.after[at - 1]
        expected = torch.stack([truth[j][0] for j in g]).mean(0)
        used = torch.zeros_like(expected) if grad is None else grad
        ratio, exact = _fit(used, clip_flat(expected, p.clip_norm))
        ratios.append(ratio)
        all_right = all_right and exact and _close(ratio, 1)
        used_norm, pile_norm = float(used.norm()), float(pile.norm())
        if p.clip_norm is not None and _close(used_norm, pile_norm) and pile_norm > p.clip_norm * (1 + _TOL):
            _say(out, "clip_missing", f"update {u} used norm {pile_norm:.3g} > clip_norm = {p.clip_norm:g}")
        if p.clip_norm is not None and exact and not _close(ratio, 1) and used_norm < pile_norm:
            _say(out, "clip_norm_differs", f"update {u} was clipped to {used_norm:.3g}, clip_norm is {p.clip_norm:g}")
        if not exact and _fit(used, truth[at - 1][0])[1]:
            _say(out, "zero_grad_every_micro_step", f"update {u} used only its last micro-batch's gradient")
        elif not exact and not out:  # only when nothing found so far explains it
            _say(out, "unexpected_gradient", f"update {u} is not the reference gradient at the same weights")
    return all_right


def _check_scheduler(tape: Tape, ref: Tape, p: Problem, out: dict) -> None:
    calls, expected = len(tape.scheduler_calls), len(ref.scheduler_calls)
    rates = f"learning rates {[float(f'{s[2]:.3g}') for s in tape.steps[:4]]}, " \
            f"reference {[float(f'{s[2]:.3g}') for s in ref.steps[:4]]}"
    if calls == len(tape.incoming) and calls > expected:
        _say(out, "scheduler_every_micro_step", f"{calls} scheduler steps, the reference {expected}; {rates}")
    elif calls != len(tape.steps):
        _say(out, "scheduler_wrong_count", f"{calls} scheduler steps for {len(tape.steps)} optimizer steps; {rates}")
    elif any(done < i + 1 for i, done in enumerate(tape.scheduler_calls)):
        _say(out, "scheduler_before_step", rates)


def _check_log(returned: object, truth: list, p: Problem, out: dict, notes: list[str]) -> bool:
    """The loop's optional return value, the loss it logged at each update, against the true mean.
    Returns whether there was a log to compare (the comparison's verdict goes into `out`)."""
    if returned is None:
        notes.append("logging not checked: the loop returned no list of logged losses")
        return False
    try:
        logged = [float(v) for v in returned]  # type: ignore[union-attr]
    except (TypeError, ValueError):
        _say(out, "bad_return_value", f"it returned {type(returned).__name__} {returned!r:.50}")
        return False
    if len(truth) < len(p.batches):
        return False  # not every batch went through backward: no true mean to compare with
    if len(logged) != len(p.groups):
        _say(out, "log_wrong", f"{len(logged)} values for {len(p.groups)} updates")
        return True
    for u, (value, g) in enumerate(zip(logged, p.groups)):
        losses = [truth[j][1] for j in g]
        mean, last, n = sum(losses) / len(g), losses[-1], len(g)
        seen = f"update {u} logged {value:.4g}, its mean loss is {mean:.4g}"
        if _close(value, mean):
            continue
        if any(_close(value, v) for v in (mean / n, mean / p.K, last / n, last / p.K)):
            _say(out, "log_divided_loss", f"{seen}, {mean / value:.3g} x more")
        elif _close(value, last):
            _say(out, "log_last_micro_batch", seen)
        else:
            _say(out, "log_wrong", seen)
    return True


def _checked_arguments(loop, accumulation_steps, num_batches, with_scheduler, clip_norm) -> tuple[int, int]:
    if not callable(loop):
        raise TypeError("loop must be a function like my_loop(model, optimizer, loss_fn, batches, "
                        f"accumulation_steps, scheduler=None), got {type(loop).__name__} {loop!r:.40}")
    K = check_int("accumulation_steps", accumulation_steps, 1, 64)
    N = 2 * K + max(1, K // 2) if num_batches is None else check_int("num_batches", num_batches, 1, 256)
    if not isinstance(with_scheduler, bool):
        raise TypeError(f"with_scheduler must be True or False, got {with_scheduler!r}")
    if clip_norm is not None:
        check_float("clip_norm", clip_norm, 0.0, 1e6)
    names = "model, optimizer, loss_fn, batches, accumulation_steps" + (", scheduler" if with_scheduler else "")
    try:
        inspect.signature(loop).bind(*names.split(", "))
    except TypeError:
        raise TypeError(f"loop must accept ({names}); {_name(loop)}{inspect.signature(loop)} does not") from None
    except ValueError:
        pass  # no signature to inspect (a builtin): the call will tell
    return K, N


def _name(loop: Callable) -> str:
    return getattr(loop, "__name__", type(loop).__name__)


def audit_training_loop(
    loop: Callable,
    accumulation_steps: int = 4,
    *,
    num_batches: int | None = None,
    with_scheduler: bool = False,
    clip_norm: float | None = None,
) -> AuditReport:
    """Run `loop(model, optimizer, loss_fn, batches, accumulation_steps[, scheduler])` on a tiny
    deterministic problem beside the correct loop, and report in words what differs.

    `batches`: a list of (inputs, targets), 2K + K//2 of them unless `num_batches` says otherwise
    (not a multiple of K, so the uneven final group is tested); `loss_fn`: mean-reduced MSE;
    the optimizer: SGD. `with_scheduler` passes a LambdaLR warmup as `scheduler`; `clip_norm` is
    the max_norm the loop clips with, so the reference clips alike. The loop may return the loss
    it logged at each update, which is then checked too. Bad arguments raise TypeError/ValueError.
    """
    K, N = _checked_arguments(loop, accumulation_steps, num_batches, with_scheduler, clip_norm)
    problem = make_problem(K, N, None if clip_norm is None else float(clip_norm), with_scheduler)
    reference = run_loop(lambda *args: reference_loop(*args, clip_norm=problem.clip_norm), problem)
    run = run_loop(loop, problem)
    tape, out, notes, ratios = run.tape, {}, [], []  # out: mistake name -> its finding
    log_checked = False
    if run.error is not None:
        _say(out, "loop_raised", run.error)
    elif not tape.incoming:
        _say(out, "never_calls_backward", "no gradient arrived at the weights")
    else:
        backward, n_tail = len(tape.incoming), len(problem.groups[-1])
        if backward == N - n_tail and n_tail < K:
            _say(out, "tail_dropped", f"{backward} of {N} batches went through backward()")
        elif backward != N:
            _say(out, "backward_count", f"{backward} backward passes for {N} batches")
        truth = [true_gradient(w, problem.batches[j]) for j, w in enumerate(tape.weights[:N])]
        _check_piles(tape, problem, out)
        _check_steps(tape, problem, out)
        _check_loss_scale(tape, truth, problem, out)
        if with_scheduler:
            _check_scheduler(tape, reference.tape, problem, out)
        if _check_updates(tape, truth, problem, out, ratios) and clip_norm is None and out.keys() & _SCALES:
            # the losses were scaled wrongly, but every update came out right: .grad was rescaled instead
            notes.append("your loop rescales .grad instead of the loss; the updates come out right")
            for name in _SCALES:
                out.pop(name, None)
        log_checked = _check_log(run.returned, truth, problem, out, notes)
        if not tape.steps and bool(run.weight.abs().max() > 0):
            notes.append("the weights changed, but not through the optimizer passed in: use that optimizer")
        if not out and not torch.allclose(run.weight, reference.weight, rtol=1e-9, atol=1e-12):
            delta = float((run.weight - reference.weight).abs().max())
            _say(out, "differs_from_reference", f"max |difference| = {delta:.3g}")
    counts = {
        "backward passes": (len(tape.incoming), len(reference.tape.incoming)),
        "optimizer.step()": (len(tape.steps), len(reference.tape.steps)),
        "zero_grad()": (tape.zero_grads, reference.tape.zero_grads),
    }
    if with_scheduler:
        counts["scheduler.step()"] = (len(tape.scheduler_calls), len(reference.tape.scheduler_calls))
    return AuditReport(
        loop_name=_name(loop), accumulation_steps=K, num_batches=N, micro_batch_size=problem.b,
        mistakes=frozenset(out), findings=list(out.values()), counts=counts, update_ratios=ratios,
        log_checked=log_checked,
        notes=notes + [f"torch warned: {w}" for w in run.warnings],
    )
