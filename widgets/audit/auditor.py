"""The loop auditor: run a learner's accumulation loop on a tiny problem and say what differs.

    def my_loop(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None): ...
    audit_training_loop(my_loop, accumulation_steps=4)   # prints as a plain-words report
    audit_training_loop(my_loop, 4, streaming=True)      # batches as a stream with no len()
    audit_training_loop(my_loop, 4, problem="tokens")    # padded sequences, ignore_index targets

The loop is watched from outside, nothing is bound behind the learner's back (the instruments
live in `widgets.audit.instruments`); the correct loop runs on the same problem as the reference.
`_judge` reads the record structure first (which micro-batches went through backward, where the
steps fall, where the pile was emptied), then only the numbers that structure allows
(`widgets.audit.checks`), so a loop with one mistake is told that one. Mistakes are named with the
`widgets.core.config.BUGS` names where one applies; all are listed in `AUDIT_MISTAKES`. Float64
throughout, so every ratio is exact to ~1e-12.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Callable

import torch

from widgets.audit import checks
from widgets.audit.instruments import LEARNING_RATE, run_loop
from widgets.audit.mistakes import AUDIT_MISTAKES, SCALE_MISTAKES, Finding
from widgets.audit.problems import TASKS, make_problem, reference_loop, reference_token_loop
from widgets.core.threads import one_thread
from widgets.core.config import check_float, check_int

__all__ = ["AUDIT_MISTAKES", "LEARNING_RATE", "AuditReport", "audit_training_loop"]


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
    streaming: bool = False  # batches were handed as a one-pass stream with no len()
    problem: str = "regression"

    @property
    def matches_reference(self) -> bool:
        return not self.mistakes

    def __str__(self) -> str:
        K, N = self.accumulation_steps, self.num_batches
        tail = N % K
        unit = TASKS[self.problem].unit
        lines = [
            f"Audit of {self.loop_name} with accumulation_steps = {K}: {N} micro-batches of {self.micro_batch_size} "
            f"{unit} -> {-(-N // K)} updates" + (f" (the last of {tail} micro-batches)" if tail else "")
            + (", handed as a stream with no len()" if self.streaming else ""),
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


def _checked_arguments(loop, accumulation_steps, num_batches, with_scheduler, clip_norm, streaming,
                       problem) -> tuple[int, int]:
    if not callable(loop):
        raise TypeError("loop must be a function like my_loop(model, optimizer, loss_fn, batches, "
                        f"accumulation_steps, scheduler=None), got {type(loop).__name__} {loop!r:.40}")
    K = check_int("accumulation_steps", accumulation_steps, 1, 64)
    N = 2 * K + max(1, K // 2) if num_batches is None else check_int("num_batches", num_batches, 1, 256)
    for name, value in (("with_scheduler", with_scheduler), ("streaming", streaming)):
        if not isinstance(value, bool):
            raise TypeError(f"{name} must be True or False, got {value!r}")
    if clip_norm is not None:
        check_float("clip_norm", clip_norm, 0.0, 1e6)
    if problem not in TASKS:
        raise ValueError(f"problem must be one of {sorted(TASKS)}, got {problem!r}")
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
    streaming: bool = False,
    problem: str = "regression",
) -> AuditReport:
    """Run `loop(model, optimizer, loss_fn, batches, accumulation_steps[, scheduler])` on a tiny
    deterministic problem beside the correct loop, and report in words what differs.

    `batches`: a list of (inputs, targets), 2K + K//2 of them unless `num_batches` says otherwise
    (not a multiple of K, so the uneven final group is tested); `streaming=True` hands them as a
    one-pass stream with no len(), like a DataLoader of unknown length. `problem="regression"`:
    inputs (b, 3), `loss_fn` mean-reduced MSE; `problem="tokens"`: padded token ids (b, T) and
    next-token targets with IGNORE_INDEX (-100) at the padding, `loss_fn(logits, targets,
    reduction="mean")` a cross-entropy over the real tokens. The optimizer: SGD. `with_scheduler`
    passes a LambdaLR warmup as `scheduler`; `clip_norm` is the max_norm the loop clips with, so
    the reference clips alike. The loop may return the loss it logged at each update, which is
    then checked too. Bad arguments raise TypeError/ValueError naming the parameter.
    """
    K, N = _checked_arguments(loop, accumulation_steps, num_batches, with_scheduler, clip_norm, streaming, problem)
    with one_thread():  # tensors of a few dozen numbers: more threads only wait on each other
        return _audit(loop, K, N, with_scheduler, clip_norm, streaming, problem)


def _audit(loop, K, N, with_scheduler, clip_norm, streaming, problem) -> AuditReport:
    setup = make_problem(K, N, None if clip_norm is None else float(clip_norm), with_scheduler, problem, streaming)
    right_loop = reference_loop if problem == "regression" else reference_token_loop
    reference = run_loop(lambda *args: right_loop(*args, clip_norm=setup.clip_norm),
                         make_problem(K, N, setup.clip_norm, with_scheduler, problem))
    run = run_loop(loop, setup)
    verdict = _judge(run, reference, setup)
    tape = run.tape
    counts = {
        "backward passes": (len(tape.passes), len(reference.tape.passes)),
        "optimizer.step()": (len(tape.steps), len(reference.tape.steps)),
        "zero_grad()": (tape.zero_grads, reference.tape.zero_grads),
    }
    if with_scheduler:
        counts["scheduler.step()"] = (len(tape.scheduler_calls), len(reference.tape.scheduler_calls))
    return AuditReport(
        loop_name=_name(loop), accumulation_steps=K, num_batches=N, micro_batch_size=setup.b,
        mistakes=frozenset(f.name for f in verdict.findings), findings=[f.sentence() for f in verdict.findings],
        counts=counts, update_ratios=verdict.ratios, log_checked=verdict.log_checked,
        notes=verdict.notes + [f"torch warned: {w}" for w in run.warnings],
        streaming=streaming, problem=problem,
    )


@dataclass(frozen=True)
class _Verdict:
    findings: list[Finding]
    notes: list[str]
    ratios: list[float]
    log_checked: bool


def _judge(run, reference, problem) -> _Verdict:
    """Structure first (which micro-batches went through backward, where the steps fall, where the
    pile was emptied), then the numbers the structure allows; the first finding of each name is kept."""
    tape = run.tape
    if run.error is not None:
        return _Verdict([Finding("loop_raised", run.error)], [], [], False)
    if not tape.passes:
        return _Verdict([Finding("never_calls_backward", "no gradient arrived at the weights")], [], [], False)
    structure = checks.read_structure(tape, problem)
    coverage = checks.check_coverage(structure, problem)
    if not structure.recognised:
        return _Verdict(coverage, [], [], False)
    findings = coverage + checks.check_steps(tape, structure, problem) + checks.check_piles(tape, structure, problem)
    boundaries = checks.check_boundaries(tape, problem)
    scale = checks.check_loss_scale(checks.loss_factors(tape, structure, problem, boundaries.rescale), problem)
    findings += scale + checks.check_backward_passes(tape, problem) + boundaries.findings
    notes = []
    if any(not checks.close(r, 1) for r in boundaries.rescale) and not (SCALE_MISTAKES & {f.name for f in scale}):
        notes.append("your loop rescales .grad instead of the loss; the updates come out right")
    if problem.with_scheduler:
        findings += checks.check_scheduler(tape, reference.tape)
    log = checks.check_log(run.returned, tape, structure, problem)
    findings += log.findings
    notes += log.notes
    if not tape.steps and bool(run.weight.abs().max() > 0):
        notes.append("the weights changed, but not through the optimizer passed in: use that optimizer")
    if not findings and not torch.allclose(run.weight, reference.weight, rtol=1e-9, atol=1e-12):
        delta = float((run.weight - reference.weight).abs().max())
        findings.append(Finding("differs_from_reference", f"max |difference| = {delta:.3g}"))
    return _Verdict(checks.first_of_each(findings), notes, checks.update_ratios(tape, structure, problem),
                    log.checked)
