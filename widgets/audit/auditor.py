"""The loop auditor: run a learner's accumulation loop on a tiny problem and say what differs.

    def my_loop(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None): ...
    audit_training_loop(my_loop, accumulation_steps=4)   # prints as a plain-words report
    audit_training_loop(my_loop, 4, streaming=True)      # batches as a stream with no len()
    audit_training_loop(my_loop, 4, problem="tokens")    # padded sequences, ignore_index targets
    audit_training_loop(my_loop, 4, problem="rl")        # -A log p over completions (widgets.audit.rl_problem)
    audit_training_loop(my_loop, 2, problem="tokens", world_size=2)  # once per rank, with comm= (widgets.audit.ranks)

The loop gets 2K + K//2 micro-batches (`num_batches`), the last one short as drop_last=False leaves it,
an SGD optimizer, a mean-reduced `loss_fn`, a LambdaLR warmup with `with_scheduler`, and the
max_norm it clips with as `clip_norm`; with `world_size` > 1 it runs once per rank in threads with a
keyword `comm`. It is stopped after `time_limit_s`. Watched from outside (`instruments`), it is judged
on its outcome first (did each `optimizer.step()` use the right gradient at its weights?); only a
wrong update is diagnosed (`diagnosis`), so a loop with one mistake is told that one. Mistakes are
named and explained from `widgets.core.mistakes.EVERY_MISTAKE`.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass, field, replace
from math import isclose as _isclose
from typing import Callable

import torch

from widgets.audit import diagnosis, outcome, ranks
from widgets.audit.instruments import LEARNING_RATE, UNSCALE_OP, Run, run_loop
from widgets.audit.outcome import Finding
from widgets.audit.patches import put_back
from widgets.audit.problems import TASKS, AuditSetup, Problem, make_problem
from widgets.core.config import check_float, check_int
from widgets.core.time_limit import TIME_LIMIT_S
from widgets.core.torch_state import known_torch_state

_allclose = torch.allclose  # bound at import: a loop that replaces torch.allclose changes no verdict

__all__ = ["LEARNING_RATE", "AuditReport", "audit_training_loop"]
# PyTorch's own error messages, each explained in one sentence about an accumulation loop
TORCH_ERRORS: dict[str, str] = {  # a piece of the message -> what it means here
    "backward through the graph a second time": "a backward() ran through a graph an earlier backward() had already "
        "freed: a loss (or a running total of losses) from an earlier micro-step was backpropagated again; keep "
        "loss.item() or loss.detach() for logging, and call backward() once per micro-batch's loss",
    "does not require grad and does not have a grad_fn": "backward() was called on a loss with no graph: it was "
        "computed under torch.no_grad() or detached, so no gradient can reach the weights",
    "No inf checks were recorded prior to update": "scaler.update() ran before any scaler.step(optimizer) since the "
        "last update: the scale must be updated once per update, after scaler.step",
    "unscale_() has already been called on this optimizer": "scaler.unscale_(optimizer) ran twice in one update: "
        "call it once, after the last backward() of the update",
    "modified by an inplace operation": "the weights (or a tensor a graph saved) changed between a forward pass and "
        "its backward(): an optimizer.step() ran before the backward of a micro-batch already computed",
    "leaf Variable that requires grad is being used in an in-place operation": "the weights were changed in place "
        "outside torch.no_grad(): let the optimizer change them, or wrap the change in torch.no_grad()",
    "shapes cannot be multiplied": "a tensor of the wrong shape reached the model: pass each micro-batch's inputs "
        "as they come, (b, features)",
}


@dataclass(frozen=True)
class AuditReport:
    """What `audit_training_loop` found; prints as a plain-words report."""

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
    last_micro_batch_size: int | None = None  # fewer examples (sequences), as drop_last=False leaves it
    world_size: int = 1  # ranks the loop ran on, each with num_batches micro-batches of its own

    @property
    def matches_reference(self) -> bool:
        return not self.mistakes

    def __str__(self) -> str:
        K, N = self.accumulation_steps, self.num_batches
        tail = N % K
        unit = TASKS[self.problem].unit
        lines = [
            f"Audit of {self.loop_name} with accumulation_steps = {K}"
            + (f" on each of {self.world_size} ranks" if self.world_size > 1 else "")
            + f": {N} micro-batches of {self.micro_batch_size} "
            f"{unit}" + (f" (the last of {self.last_micro_batch_size})" if self.last_micro_batch_size
                          not in (None, self.micro_batch_size) else "")
            + (" per rank" if self.world_size > 1 else "")
            + f" -> {-(-N // K)} updates" + (f" (the last of {tail} micro-batches)" if tail else "")
            + (", handed as a stream with no len()" if self.streaming else ""),
            f"  {'':22}{'yours':>8}{'reference':>11}",
        ]
        for name, (yours, ref) in self.counts.items():
            lines.append(f"  {name:22}{yours:>8}{ref:>11}")
        if self.update_ratios:
            lines.append("  gradient / reference at each update: " + ", ".join(f"{r:.3g}" for r in self.update_ratios))
        mistakes = ", ".join(sorted(self.mistakes))
        if self.matches_reference:
            lines.append("Verdict: matches the reference.")
        elif self.update_ratios and all(_isclose(r, 1, rel_tol=1e-6) for r in self.update_ratios) \
                and len(self.update_ratios) == -(-N // K):
            lines.append("Verdict: every update used the reference gradient, but the loop differs from the "
                         "reference elsewhere. Mistakes: " + mistakes)
        else:
            lines.append("Verdict: differs from the reference. Mistakes: " + mistakes)
        lines += [f"  - {f}" for f in self.findings] + [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)

    __repr__ = __str__

    def _repr_pretty_(self, printer, cycle) -> None:
        printer.text(str(self))


def _checked_setup(loop, accumulation_steps, num_batches, with_scheduler, clip_norm, streaming,
                   problem, time_limit_s, world_size) -> AuditSetup:
    """The audit's options, each checked once, here, as one AuditSetup; bad ones raise naming the parameter."""
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
    if not isinstance(problem, str) or problem not in TASKS:
        raise ValueError(f"problem must be one of {sorted(TASKS)}, got {problem!r}")
    check_float("time_limit_s", time_limit_s, 0.0, 3600.0)
    if isinstance(world_size, bool) or not isinstance(world_size, int):
        raise TypeError(f"world_size must be an int, one of {list(ranks.WORLD_SIZES)}, got {world_size!r}")
    if world_size not in ranks.WORLD_SIZES:
        raise ValueError(f"world_size must be one of {list(ranks.WORLD_SIZES)}, got {world_size!r}")
    if world_size > 1 and problem != "tokens":
        raise ValueError(f"problem must be 'tokens' when world_size > 1 (ranks with unequal token counts), "
                         f"got {problem!r}")
    if world_size > 1 and clip_norm is not None:
        raise ValueError("clip_norm must be None when world_size > 1: the ranks' piles are averaged at "
                         "optimizer.step(), after any clip, so a clip could not be judged")
    names = "model, optimizer, loss_fn, batches, accumulation_steps" + (", scheduler" if with_scheduler else "")
    keywords = {"comm": None} if world_size > 1 else {}
    try:
        inspect.signature(loop).bind(*names.split(", "), **keywords)
    except TypeError:
        if keywords:
            raise TypeError(f"with world_size > 1 the loop must accept ({names}, comm=...): comm gives .rank, "
                            f".world_size and .all_reduce(tensor); {_name(loop)}{inspect.signature(loop)} does "
                            "not take comm") from None
        raise TypeError(f"loop must accept ({names}); {_name(loop)}{inspect.signature(loop)} does not") from None
    except ValueError:
        pass  # no signature to inspect (a builtin): the call will tell
    return AuditSetup(K, N, None if clip_norm is None else float(clip_norm), with_scheduler, problem, streaming,
                      float(time_limit_s), world_size)


def _name(loop: Callable) -> str:
    try:
        name = getattr(loop, "__name__", None)
    except Exception:  # a callable whose attributes raise
        name = None
    return name if isinstance(name, str) else type(loop).__name__


def audit_training_loop(
    loop: Callable,
    accumulation_steps: int = 4,
    *,
    num_batches: int | None = None,
    with_scheduler: bool = False,
    clip_norm: float | None = None,
    streaming: bool = False,
    problem: str = "regression",
    time_limit_s: float = TIME_LIMIT_S,
    world_size: int = 1,
) -> AuditReport:
    """Run `loop` on a tiny seeded float64 problem beside the correct loop, and report in words what differs.

    Bad arguments raise naming the parameter; nothing the loop does makes the auditor raise or hang.
    """
    setup = _checked_setup(loop, accumulation_steps, num_batches, with_scheduler, clip_norm, streaming, problem,
                           time_limit_s, world_size)
    if setup.world_size > 1:
        return _audit_ranks(loop, setup)
    with known_torch_state():  # tensors of a few dozen numbers: one thread; more only wait on each other
        reference_problem = make_problem(replace(setup, streaming=False))
        reference = run_loop(reference_problem.reference_loop, reference_problem)
    handed = make_problem(setup)
    with known_torch_state():  # the learner's state is given back after, also when the loop changed it
        run = run_loop(loop, handed, setup.time_limit_s)
    with known_torch_state():  # and the judging runs in a known state, whatever the loop left behind
        return _report(loop, run, reference, handed, setup)


def _audit_ranks(loop, setup: AuditSetup) -> AuditReport:
    """The loop once per rank (`widgets.audit.ranks`), each rank judged against its right share; the
    ratios are those of the averaged pile each step used, over the reference's."""
    with known_torch_state():
        problems, whole = ranks.rank_problems(setup)
        reference = run_loop(whole.reference_loop, whole)
    K, N, world_size = setup.K, setup.N, setup.world_size
    # what the loop replaced is put back here, not per rank: the ranks run at once, and one rank's put-back
    # could undo another's replacement before the other put it back
    with known_torch_state(), put_back() as replaced:
        runs, consequences, left = ranks.run_ranks(loop, problems, setup.time_limit_s)
    runs[0].replaced = replaced
    with known_torch_state():
        order = sorted(range(world_size), key=lambda r: r in consequences)  # a rank's own error before its echoes
        findings, notes = [], []
        for r in order:
            runs[r].log, runs[r].log_problem = None, None  # each rank logs its own share: not judged
            verdict = _judge_safely(runs[r], reference, problems[r])
            echoes = r in consequences and findings  # it raised only because a rank already judged stopped
            findings += [f if "rank" in f.seen else Finding(f.name, f"on rank {r}: {f.seen}") for f in verdict.findings
                         if not (echoes and f.name == "loop_raised")]
            notes += [n for n in verdict.notes if not n.startswith("logging not checked")]
        findings = outcome.first_of_each(findings)
        tapes = [run.tape for run in runs]
        counts = {
            "backward passes": (sum(len(t.passes) for t in tapes), len(reference.tape.passes)),
            "optimizer.step()": (sum(len(t.steps) for t in tapes), world_size * len(reference.tape.steps)),
            "zero_grad()": (sum(t.zero_grads for t in tapes), world_size * reference.tape.zero_grads),
        }
        if setup.with_scheduler:
            counts["scheduler.step()"] = (sum(len(t.scheduler_calls) for t in tapes),
                                          world_size * len(reference.tape.scheduler_calls))
        notes += [f"counts are summed over the {world_size} ranks; logging not checked across ranks"]
        notes += [f"rank {r}'s thread runs on in the background on its own copy of the model until that call "
                  "returns, and is then stopped at its next line" for r in left]
        return AuditReport(
            loop_name=_name(loop), accumulation_steps=K, num_batches=N, micro_batch_size=problems[0].b,
            mistakes=frozenset(f.name for f in findings), findings=[f.sentence() for f in findings], counts=counts,
            update_ratios=_averaged_ratios(runs, problems), notes=list(dict.fromkeys(notes)) + [
                f"torch warned: {w}" for w in runs[0].warnings], streaming=setup.streaming, problem="tokens",
            last_micro_batch_size=len(problems[0].batches[-1][0]), world_size=world_size,
        )


def _averaged_ratios(runs: list[Run], problems) -> list[float]:
    """Per update: the mean of the ranks' piles over the mean of their right ones, at the step's weight
    (the gradient DDP's step used, over the reference's); [] unless every rank stepped once per update."""
    try:
        U = len(problems[0].windows)
        if any(len(run.tape.steps) != U or any(s.grad is None for s in run.tape.steps) for run in runs):
            return []
        ratios = []
        for u, window in enumerate(problems[0].windows):
            used = sum(run.tape.steps[u].grad for run in runs)
            right = sum(outcome.window_truth(p, run.tape.steps[u].weight, window).grad
                        for run, p in zip(runs, problems))
            ratios.append(outcome.proportion(used, right).ratio)
        return ratios
    except Exception:  # an odd record: no ratios rather than an error at the learner
        return []


def _report(loop, run: Run, reference: Run, handed: Problem, setup: AuditSetup) -> AuditReport:
    verdict = _judge_safely(run, reference, handed)
    tape = run.tape
    counts = {
        "backward passes": (len(tape.passes), len(reference.tape.passes)),
        "optimizer.step()": (len(tape.steps), len(reference.tape.steps)),
        "zero_grad()": (tape.zero_grads, reference.tape.zero_grads),
    }
    if setup.with_scheduler:
        counts["scheduler.step()"] = (len(tape.scheduler_calls), len(reference.tape.scheduler_calls))
    return AuditReport(
        loop_name=_name(loop), accumulation_steps=setup.K, num_batches=setup.N, micro_batch_size=handed.b,
        mistakes=frozenset(f.name for f in verdict.findings), findings=[f.sentence() for f in verdict.findings],
        counts=counts, update_ratios=verdict.ratios, log_checked=verdict.log_checked,
        notes=verdict.notes + [f"torch warned: {w}" for w in run.warnings],
        streaming=setup.streaming, problem=setup.problem, last_micro_batch_size=len(handed.batches[-1][0]),
    )


@dataclass(frozen=True)
class _Verdict:
    findings: list[Finding]
    notes: list[str]
    ratios: list[float]
    log_checked: bool


def _judge_safely(run, reference, problem) -> _Verdict:
    """`_judge`, plus the functions the loop replaced; if reading an odd record fails, the outcome alone."""
    try:
        verdict = _judge(run, reference, problem)
    except Exception as error:  # a record no check foresaw: say so rather than raise at the learner
        weights_match = _allclose(run.weight, reference.weight, rtol=1e-9, atol=1e-12)
        findings = [] if weights_match else [Finding("differs_from_reference", "the auditor could not read "
                                                                             "more of this loop")]
        return _Verdict(findings, [f"the auditor could not read this loop's record in detail ({type(error).__name__})"],
                        [], False)
    replaced = [Finding("replaced_functions", ", ".join(run.replaced[:6]) + (", ..." if len(run.replaced) > 6 else ""))
                ] if run.replaced else []
    return _Verdict(outcome.first_of_each(verdict.findings + replaced), verdict.notes, verdict.ratios,
                    verdict.log_checked)


def _raised(run) -> list[Finding]:
    """The loop's exception, with PyTorch's own message explained where it is a known one."""
    if run.timed_out:
        return [Finding("time_limit", run.error)]
    if "No inf checks were recorded prior to update" in run.error_message:
        return [Finding("amp_update_every_micro_step", run.error)]
    meaning = next((m for piece, m in TORCH_ERRORS.items() if piece in run.error_message), None)
    return [Finding("loop_raised", run.error + (f"; that means {meaning}" if meaning else ""))]


def _judge(run, reference, problem) -> _Verdict:
    """The outcome first; when it is wrong, the structure, then the numbers the structure allows."""
    tape = run.tape
    if run.error is not None:
        return _Verdict(_raised(run), [], [], False)
    result = outcome.check_outcome(tape, problem)
    kept = [Finding("graphs_kept_alive", _graphs_seen(tape, problem))] if _graphs_kept(tape, result) else []
    kept += diagnosis.check_windows(tape, problem)
    notes: list[str] = []
    structure, scale = None, []
    if result.exact:
        findings = list(kept)
        notes += _how_it_piled(tape, problem)
        ratios = result.ratios
    else:
        if not tape.passes:
            return _Verdict([Finding("never_calls_backward", "no gradient arrived at the weights")], [], [], False)
        if not tape.steps and bool(run.weight.abs().max() > 0):  # it started at zero
            return _Verdict([Finding("steps_by_hand", f"the weights changed, with {len(tape.passes)} backward "
                                                      "passes and no optimizer.step()")] + kept, [], [], False)
        structure = diagnosis.read_structure(tape, problem)
        coverage = diagnosis.check_coverage(tape, structure, problem)
        if not structure.recognised:
            return _Verdict(coverage, [], [], False)
        amp = diagnosis.check_amp(tape, problem)
        steps = diagnosis.check_steps(tape, structure, problem)
        findings = coverage + steps + kept
        if amp or any(f.name in ("step_twice", "amp_step_twice") for f in steps):
            findings += amp
        else:
            findings += diagnosis.check_piles(tape, structure, problem)
            boundaries = diagnosis.check_boundaries(tape, problem)
            scale = diagnosis.check_loss_scale(diagnosis.loss_factors(tape, structure, problem, boundaries.rescale),
                                               problem)
            findings += scale + diagnosis.check_backward_passes(tape, problem) + boundaries.findings
        ratios = result.ratios or diagnosis.update_ratios(tape, structure, problem)
    schedule = outcome.check_scheduler(tape, reference.tape) if problem.with_scheduler else []
    findings += schedule
    if not schedule:
        findings = _learning_rate(tape, reference.tape, problem, findings, scale)
    log = outcome.check_log(run.log, run.log_problem, tape, structure, problem, result)
    findings += log.findings
    notes += log.notes
    if not findings and not _allclose(run.weight, reference.weight, rtol=1e-9, atol=1e-12):
        delta = float((run.weight - reference.weight).abs().max())
        findings.append(Finding("differs_from_reference", f"max |difference| = {delta:.3g}"))
    return _Verdict(outcome.first_of_each(findings), notes, ratios, log.checked)


def _learning_rate(tape, reference, problem, findings: list[Finding], scale: list[Finding]) -> list[Finding]:
    """The learning rate each step ran at, against the reference's step for step. Divided by K where
    the loss was left undivided, a full window's update comes out right: one mistake, named for what
    was done, in place of the undivided loss."""
    if len(tape.steps) != len(reference.steps):
        return findings
    rates = [s.lr / r.lr for s, r in zip(tape.steps, reference.steps)]
    if all(outcome.close(rate, 1) for rate in rates):
        return findings
    seen = f"steps ran at learning rates {[float(f'{s.lr:.3g}') for s in tape.steps[:4]]}, the reference's at " \
           f"{[float(f'{s.lr:.3g}') for s in reference.steps[:4]]}"
    if [f.name for f in scale] == ["loss_not_divided"] and all(outcome.close(rate, 1 / problem.K) for rate in rates):
        return [f for f in findings if f not in scale] + [Finding(
            "lr_scaled_instead_of_loss", f"{seen}, 1/K of it, with each micro-batch's loss undivided",
            "leave the learning rate as it is, and " + problem.share_fix)]
    return findings + [Finding("learning_rate_changed", seen)]


def _graphs_kept(tape, result) -> bool:
    """Two or more earlier micro-batches' outputs alive at once (held by graphs), or, in a loop whose
    updates are right, one backward pass through several micro-batches' graphs built one by one."""
    return tape.graphs_alive >= 2 or (result.exact and any(len(set(p.forwards)) > 1 for p in tape.passes))


def _graphs_seen(tape, problem) -> str:
    widest = max((len(p.forwards) for p in tape.passes), default=0)
    held = max(tape.graphs_alive, widest)
    return f"up to {held} micro-batches' graphs were held at once, where backward() after each forward keeps " \
           f"at most 1 (K = {problem.K})"


def _how_it_piled(tape, problem) -> list[str]:
    """A note, in a loop whose updates are right, on a pile built another way than the reference's."""
    if not tape.passes:
        return ["no backward pass reached the model passed in: your loop computed the gradients elsewhere (a copy "
                "of the model, or by hand) and put them in .grad; the updates come out right"]
    if any(c.op == UNSCALE_OP for c in tape.grad_changes):
        return ["your loop scales the loss with a GradScaler and unscales .grad before the step; the updates "
                "come out right"]
    boundaries = diagnosis.check_boundaries(tape, problem)
    if any(not outcome.close(r, 1) for r in boundaries.rescale):
        return ["your loop rescales .grad instead of the loss; the updates come out right"]
    return []
