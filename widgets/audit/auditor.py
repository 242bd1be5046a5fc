"""The loop auditor: run a learner's accumulation loop on a tiny problem beside the correct one, and say what differs.

Watched from outside (`instruments`), a loop is judged on its outcome first (did each `optimizer.step()`
use the right gradient at its weights?); only a wrong update is diagnosed (`diagnosis`), so a loop with
one mistake is told that one, named and explained from `widgets.core.mistakes.EVERY_MISTAKE`.
"""
from __future__ import annotations

import builtins
import inspect
import math
import operator
import os
import sys
import warnings
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from math import isclose as _isclose
from typing import Callable, Iterator, NamedTuple, Sequence

import torch

from widgets.audit import diagnosis, outcome, ranks
from widgets.audit.instruments import UNSCALE_OP, Run, printable, run_loop
from widgets.audit.outcome import Finding, is_empty
from widgets.audit.problems import TASKS, AuditSetup, make_problem
from widgets.core.config import check_float, check_int
from widgets.core.loops import train_loop
from widgets.core.time_limit import TIME_LIMIT_S
from widgets.core.training import known_torch_state

_allclose = torch.allclose  # bound at import: a loop that replaces torch.allclose changes no verdict

# PyTorch's own error messages, each explained in one sentence about an accumulation loop
TORCH_ERRORS: dict[str, str] = {  # a piece of the message -> what it means here
    "backward through the graph a second time": "a backward() ran through a graph an earlier backward() had already "
        "freed: a loss (or a running total of losses) from an earlier micro-step was backpropagated again; keep "
        "loss.item() or loss.detach() for logging, and call backward() once per micro-batch's loss",
    "does not require grad and does not have a grad_fn": "backward() was called on a loss with no graph: it was "
        "computed under torch.no_grad() or detached, so no gradient can reach the weights",
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
    last_micro_batch_size: int  # fewer examples (sequences), as drop_last=False leaves it
    mistakes: frozenset[str]
    findings: list[str]
    notes: list[str]
    counts: dict[str, tuple[int, int]]  # name -> (yours, the reference's)
    update_ratios: list[float]
    log_checked: bool
    problem: str
    world_size: int  # ranks the loop ran on, each with num_batches micro-batches of its own

    @property
    def matches_reference(self) -> bool:
        return not self.mistakes

    def __str__(self) -> str:
        K, N = self.accumulation_steps, self.num_batches
        tail = N % K
        lines = [
            f"Audit of {self.loop_name} with accumulation_steps = {K}"
            + (f" on each of {self.world_size} ranks" if self.world_size > 1 else "")
            + f": {N} micro-batches of {self.micro_batch_size} {TASKS[self.problem].unit}"
            + (f" (the last of {self.last_micro_batch_size})" if self.last_micro_batch_size != self.micro_batch_size
               else "")
            + (" per rank" if self.world_size > 1 else "")
            + f" -> {-(-N // K)} updates" + (f" (the last of {tail} micro-batches)" if tail else ""),
            f"  {'':22}{'yours':>8}{'reference':>11}",
        ]
        lines += [f"  {name:22}{yours:>8}{ref:>11}" for name, (yours, ref) in self.counts.items()]
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

    __repr__ = __str__  # a notebook shows the report, IPython's pretty printer included


def _checked_setup(loop, accumulation_steps, num_batches, with_scheduler, clip_norm, problem, time_limit_s,
                   world_size) -> AuditSetup:
    """The audit's options, each checked once, here, as one AuditSetup; bad ones raise naming the parameter."""
    if not callable(loop):
        raise TypeError("loop must be a function like my_loop(model, optimizer, loss_fn, batches, "
                        f"accumulation_steps, scheduler=None), got {type(loop).__name__} {loop!r:.40}")
    K = check_int("accumulation_steps", accumulation_steps, 1, 64)
    N = 2 * K + max(1, K // 2) if num_batches is None else check_int("num_batches", num_batches, 1, 256)
    if not isinstance(with_scheduler, bool):
        raise TypeError(f"with_scheduler must be True or False, got {with_scheduler!r}")
    clip = None if clip_norm is None else check_float("clip_norm", clip_norm, 0.0, 1e6)
    if not isinstance(problem, str) or problem not in TASKS:
        raise ValueError(f"problem must be one of {sorted(TASKS)}, got {problem!r}")
    seconds = check_float("time_limit_s", time_limit_s, 0.0, 3600.0)
    if isinstance(world_size, bool) or not isinstance(world_size, int):
        raise TypeError(f"world_size must be an int, one of {list(ranks.WORLD_SIZES)}, got {world_size!r}")
    if world_size not in ranks.WORLD_SIZES:
        raise ValueError(f"world_size must be one of {list(ranks.WORLD_SIZES)}, got {world_size!r}")
    names = "model, optimizer, loss_fn, batches, accumulation_steps" + (", scheduler" if with_scheduler else "")
    try:
        signature = inspect.signature(loop)
    except ValueError:
        signature = None  # no signature to inspect (a builtin): the call will tell
    ddp = world_size > 1 and (signature is None or "comm" not in signature.parameters)
    if world_size > 1 and not ddp and problem != "tokens":
        raise ValueError(f"problem must be 'tokens' for a loop taking comm (ranks with unequal token counts), "
                         f"got {problem!r}")
    if world_size > 1 and not ddp and clip_norm is not None:
        raise ValueError("clip_norm must be None for a loop taking comm: the ranks' piles are averaged at "
                         "optimizer.step(), after any clip, so a clip could not be judged")
    if ddp and problem not in ("regression", "tokens"):
        raise ValueError(f"problem must be 'regression' or 'tokens' when world_size > 1, got {problem!r}")
    keywords = {"comm": None} if world_size > 1 and not ddp else {}
    try:
        if signature is not None:
            signature.bind(*names.split(", "), **keywords)
    except TypeError:
        raise TypeError(f"loop must accept ({names}" + (", comm=...)" if keywords else ")")
                        + f"; {_name(loop)}{signature} does not") from None
    return AuditSetup(K, N, clip, with_scheduler, problem, seconds, world_size, ddp)


def _name(loop: Callable) -> str:
    name = getattr(loop, "__name__", None)
    return name if isinstance(name, str) else type(loop).__name__


def audit_training_loop(
    loop: Callable,
    accumulation_steps: int = 4,
    *,
    num_batches: int | None = None,
    with_scheduler: bool = False,
    clip_norm: float | None = None,
    problem: str = "regression",
    time_limit_s: float = TIME_LIMIT_S,
    world_size: int = 1,
) -> AuditReport:
    """Run `loop(model, optimizer, loss_fn, batches, accumulation_steps[, scheduler])` on a tiny seeded problem
    beside the correct loop, and report in words what differs.

    What it checks: the updates the model receives (the gradient each `optimizer.step()` uses, at the weights
    it steps from, however the loop built it), the scheduler's steps and the losses the loop returns as its log.
    What it does not: anything the loop does with the weights beside the optimizer's updates, such as an EMA
    of the weights updated every micro-batch, or metrics it keeps for itself.

    `problem` is "regression", "tokens" or "rl". With `world_size` > 1 the loop runs once per rank, in threads,
    each rank with micro-batches of its own, in one of two forms. A loop taking a keyword `comm` (tokens only,
    no clip_norm) gets `.rank`, `.world_size` and `.all_reduce(tensor)`, and the ranks' piles are averaged at
    `optimizer.step()`. A loop written for DDP (no `comm`; regression or tokens, clipping allowed) gets a model
    with DDP's `no_sync()`: a backward() outside it averages the rank's whole pile over the ranks, as DDP's
    all-reduce does, and one inside only adds to it. Syncing at every micro-step is right but costs K
    all-reduces (a note); never leaving no_sync() is a mistake. Bad arguments raise naming the parameter;
    nothing the loop does makes the auditor raise or hang (it is stopped past `time_limit_s`).
    """
    setup = _checked_setup(loop, accumulation_steps, num_batches, with_scheduler, clip_norm, problem, time_limit_s,
                           world_size)
    with known_torch_state():  # one thread for tensors of a few dozen numbers; the learner's state given back after
        if setup.world_size > 1:
            problems, whole = ranks.rank_problems(setup)
        else:
            whole = make_problem(setup)
            problems = [whole]
        # the lab's one correct loop, each mean loss weighted by its share of the window's items
        reference = run_loop(partial(train_loop, max_grad_norm=whole.clip_norm, items=whole.task.items), whole)
        # the judging after runs in a known state, whatever the loop left behind; what the loop replaced is
        # put back once all ranks are done, as one rank's put-back could undo another's replacement
        with known_torch_state(), put_back() as replaced, warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            if setup.world_size > 1:
                runs, consequences, left = ranks.run_ranks(loop, problems, setup.time_limit_s, setup.ddp)
            else:
                runs, consequences, left = [run_loop(loop, whole, setup.time_limit_s)], set(), []
        warned = [printable(w.message).split(". ")[0] for w in caught]  # first sentences
        findings, notes, verdicts = [], [], []
        for r in sorted(range(setup.world_size), key=lambda r: r in consequences):  # a rank's error before its echoes
            if setup.world_size > 1:
                runs[r].log, runs[r].log_problem = None, None  # each rank logs its own share: not judged
            verdicts.append(_judge_safely(runs[r], reference, problems[r]))
            echoes = r in consequences and findings  # it raised only because a rank already judged stopped
            findings += [f if setup.world_size == 1 or "rank" in f.seen else Finding(f.name, f"on rank {r}: {f.seen}")
                         for f in verdicts[-1].findings if not (echoes and f.name == "loop_raised")]
            notes += [n for n in verdicts[-1].notes if setup.world_size == 1 or not n.startswith("logging not checked")]
        if replaced:
            findings.append(Finding("replaced_functions", ", ".join(replaced[:6]) + (", ..." if len(replaced) > 6
                                                                                      else "")))
        W, tapes, ref = setup.world_size, [run.tape for run in runs], reference.tape
        counts = {
            "backward passes": (sum(len(t.passes) for t in tapes), len(ref.passes)),
            "optimizer.step()": (sum(len(t.steps) + t.idle_steps for t in tapes), W * len(ref.steps)),
            "zero_grad()": (sum(t.zero_grads for t in tapes), W * ref.zero_grads),
        }
        if setup.with_scheduler:
            counts["scheduler.step()"] = (sum(len(t.scheduler_calls) for t in tapes), W * len(ref.scheduler_calls))
        idle = sum(t.idle_steps for t in tapes)
        if idle:
            notes.append(f"{idle} of your optimizer.step() calls came right after another, with .grad None: they "
                         "moved nothing, with any optimizer")
        if W > 1:
            notes += [f"counts are summed over the {W} ranks; logging not checked across ranks"]
            notes += [f"rank {r}'s thread runs on in the background on its own copy of the model until that call "
                      "returns, and is then stopped at its next line" for r in left]
        findings = outcome.first_of_each(findings)
        return AuditReport(
            loop_name=_name(loop), accumulation_steps=setup.K, num_batches=setup.N, micro_batch_size=whole.b,
            mistakes=frozenset(f.name for f in findings), findings=[f.sentence() for f in findings], counts=counts,
            update_ratios=list(verdicts[0].ratios) if W == 1 or setup.ddp else _averaged_ratios(runs, problems),
            log_checked=W == 1 and verdicts[0].log_checked, problem=setup.problem, world_size=W,
            notes=list(dict.fromkeys(notes)) + [f"torch warned: {w}" for w in list(dict.fromkeys(warned))[:3]],
            last_micro_batch_size=len(problems[0].batches[-1][0]),
        )


def _averaged_ratios(runs: list[Run], problems) -> list[float]:
    """Per update, the mean of the ranks' piles over the mean of their right ones (what DDP's step used,
    over the reference's); [] unless every rank stepped once per update."""
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


class _Verdict(NamedTuple):
    findings: list[Finding]
    notes: Sequence[str] = ()
    ratios: Sequence[float] = ()
    log_checked: bool = False


def _judge_safely(run, reference, problem) -> _Verdict:
    """`_judge`; if reading an odd record fails, the outcome alone."""
    try:
        return _judge(run, reference, problem)
    except Exception as error:  # a record no check foresaw: the outcome alone rather than a raise at the learner
        delta = float((run.weight - reference.weight).abs().max())
        findings = [] if _same_weights(run.weight, reference.weight) else [
            Finding("differs_from_reference", f"max |difference| = {delta:.3g}")]
        return _Verdict(findings, [f"the verdict rests on the final weights alone: the auditor's diagnosis failed on "
                                   f"this loop ({type(error).__name__}), a fault of the auditor's, not yours"])


def _judge(run, reference, problem) -> _Verdict:
    """The outcome first; when it is wrong, the structure, then the numbers the structure allows."""
    tape = run.tape
    if run.timed_out:
        return _Verdict([Finding("time_limit", run.error)])
    if "No inf checks were recorded prior to update" in run.error_message:  # scaler.update() before any step
        return _Verdict([Finding("amp_update_every_micro_step", run.error)])
    if run.error is not None:  # PyTorch's own message explained where it is a known one
        meaning = next((m for piece, m in TORCH_ERRORS.items() if piece in run.error_message), None)
        return _Verdict([Finding("loop_raised", run.error + (f"; that means {meaning}" if meaning else ""))])
    result = outcome.check_outcome(tape, problem)
    # graphs kept: two or more earlier outputs alive at once before any backward pass freed their graphs, or,
    # where the updates are right, one backward pass through the graphs of several micro-batches built one by one
    several = max((len({tape.forwards[k].batch for k in p.forwards}) for p in tape.passes), default=0)
    held = max(tape.graphs_alive, several)
    kept = [Finding("graphs_kept_alive", f"up to {held} micro-batches' graphs were held at once, where backward() "
                                         f"after each forward keeps at most 1 (K = {problem.K})")] \
        if tape.graphs_alive >= 2 or (result.exact and several > 1) else []
    kept += diagnosis.check_windows(tape, problem)
    unsynced, notes = diagnosis.check_syncs(tape) if problem.synced is not None else ([], [])
    structure, scale = None, []
    if result.exact:
        findings = list(kept)
        notes += _how_it_piled(tape, problem)
        if tape.outputs_kept >= 2:
            notes.append(f"your loop keeps up to {tape.outputs_kept} outputs after their backward(): their graphs "
                         "are freed, so only the outputs stay (keep loss.item() if a number is all you need)")
        ratios = result.ratios
    else:
        if not tape.passes and all(is_empty(s.grad) for s in tape.steps):
            return _Verdict([_no_gradient(tape)])
        if not tape.steps and bool(run.weight.abs().max() > 0):  # it started at zero
            return _Verdict([Finding("steps_by_hand", f"the weights changed, with {len(tape.passes)} backward "
                                                      "passes and no optimizer.step()")] + kept)
        structure = diagnosis.read_structure(tape, problem) if tape.passes else None
        if not diagnosis.grad_is_the_pile(tape):  # a pile of the loop's own (a buffer, autograd.grad, torch.func)
            structure = structure if structure is not None and structure.recognised else None
            findings = unsynced + kept
            if structure is not None:
                findings += diagnosis.check_coverage(tape, structure, problem) + diagnosis.check_steps(
                    tape, structure, problem)
            findings = findings or diagnosis.check_built_piles(tape, problem)
            return _after_the_updates(run, reference, problem, findings, notes, result, structure, result.ratios)
        coverage = diagnosis.check_coverage(tape, structure, problem)
        if not structure.recognised:
            return _Verdict(coverage)
        amp = diagnosis.check_amp(tape, problem)
        steps = diagnosis.check_steps(tape, structure, problem)
        hooks = diagnosis.check_hooks(tape)  # the factors they leave are theirs, not the loss's
        findings = unsynced + coverage + steps + hooks + kept
        if amp or any(f.name in ("step_twice", "amp_step_twice") for f in steps):
            findings += amp
        else:
            findings += diagnosis.check_piles(tape, structure, problem)
            boundaries = diagnosis.check_boundaries(tape, problem)
            scale = [] if hooks else diagnosis.check_loss_scale(
                diagnosis.loss_factors(tape, structure, problem, boundaries.rescale), problem, len(tape.steps))
            findings += scale + diagnosis.check_backward_passes(tape, problem) + boundaries.findings
        ratios = result.ratios or diagnosis.update_ratios(tape, structure, problem)
    return _after_the_updates(run, reference, problem, findings, notes, result, structure, ratios, scale)


def _after_the_updates(run, reference, problem, findings, notes, result, structure, ratios, scale=()) -> _Verdict:
    """The schedule, the learning rate, the log, and the final weights, once the updates are judged."""
    tape = run.tape
    schedule = outcome.check_scheduler(tape, reference.tape) if problem.with_scheduler else []
    findings += schedule
    if not schedule:
        findings = _learning_rate(tape, reference.tape, problem, findings, scale)
    log = outcome.check_log(run.log, run.log_problem, tape, structure, problem, result)
    findings += log.findings
    notes += log.notes
    if not findings and not _same_weights(run.weight, reference.weight):
        delta = float((run.weight - reference.weight).abs().max())
        findings.append(Finding("differs_from_reference", f"max |difference| = {delta:.3g}"))
    return _Verdict(outcome.first_of_each(findings), notes, ratios, log.checked)


def _no_gradient(tape) -> Finding:
    """No backward pass added to .grad and no step had a gradient: why, from what the loop called."""
    if tape.backward_calls:
        return Finding("never_calls_backward", f"backward() ran {tape.backward_calls} times, and no gradient reached "
                                               "the weights", "call backward() on the loss the model computed, not on "
                                               "a tensor rebuilt from loss.item() or cut off by .detach()")
    return Finding("never_calls_backward", "no gradient arrived at the weights")


def _same_weights(weight: torch.Tensor, reference: torch.Tensor) -> bool:
    """The final weights agree to the tolerance each update's gradient is held to (float32 rounding passes)."""
    return _allclose(weight, reference, rtol=outcome.TOLERANCE, atol=outcome.TOLERANCE * float(reference.abs().max()))


def _learning_rate(tape, reference, problem, findings: list[Finding], scale: list[Finding]) -> list[Finding]:
    """The learning rate each step ran at, against the reference's step for step."""
    rates = [s.lr / r.lr for s, r in zip(tape.steps, reference.steps)]
    if len(tape.steps) != len(reference.steps) or all(outcome.close(rate, 1) for rate in rates):
        return findings
    seen = f"steps ran at learning rates {[float(f'{s.lr:.3g}') for s in tape.steps[:4]]}, the reference's at " \
           f"{[float(f'{s.lr:.3g}') for s in reference.steps[:4]]}"
    # divided by K where the loss was left undivided, a full window's update comes out right: one mistake
    if [f.name for f in scale] == ["loss_not_divided"] and all(outcome.close(rate, 1 / problem.K) for rate in rates):
        return [f for f in findings if f not in scale] + [Finding(
            "lr_scaled_instead_of_loss", f"{seen}, 1/K of it, with each micro-batch's loss undivided",
            "leave the learning rate as it is, and " + problem.share_fix)]
    return findings + [Finding("learning_rate_changed", seen)]


def _how_it_piled(tape, problem) -> list[str]:
    """A note, in a loop whose updates are right, on a pile built another way than the reference's."""
    if not tape.passes:
        return ["no backward() added to the .grad of the model passed in: your loop computed the gradients elsewhere "
                "(torch.autograd.grad, torch.func, a copy of the model, or by hand) and put them in .grad; the updates "
                "come out right"]
    if any(c.op == UNSCALE_OP for c in tape.grad_changes):
        return ["your loop scales the loss with a GradScaler and unscales .grad before the step; the updates "
                "come out right"]
    if any(not outcome.close(r, 1) for r in diagnosis.check_boundaries(tape, problem).rescale):
        return ["your loop rescales .grad instead of the loss; the updates come out right"]
    return []


_MISSING = object()
_CHANGES_ON_ITS_OWN = {("builtins", "_"),  # the interactive interpreter's last value (callable or not)
                       ("torch", "Storage")}  # set_default_dtype's alias of the default dtype's storage class


@contextmanager
def put_back() -> Iterator[list[str]]:
    """Yield a list that, after the block, names each function the block replaced in torch, math, Python's
    builtins or the auditor itself, all put back: a loop that sets `torch.allclose = lambda *a, **k: True`
    would otherwise talk the auditor into a verdict and spoil every later audit in the kernel."""
    modules = [builtins, math, operator, torch, torch.nn.functional, torch.autograd, torch.nn.utils, torch.linalg,
               torch.optim.lr_scheduler, torch.amp, sys.modules["widgets.core.time_limit"]]
    modules += [m for name, m in sorted(sys.modules.items()) if name.startswith("widgets.audit.") and m is not None]
    classes = {"torch.Tensor": torch.Tensor, "torch.nn.Module": torch.nn.Module}
    classes.update((f"{c.__module__}.{c.__qualname__}", c) for c in (
        torch.nn.Linear, torch.nn.Embedding, torch.optim.Optimizer, torch.optim.SGD, torch.nn.MSELoss,
        torch.amp.GradScaler, torch.overrides.TorchFunctionMode))
    saved = [(label, space, dict(vars(space))) for label, space in [(m.__name__, m) for m in modules]
             + list(classes.items())]
    replaced: list[str] = []
    try:
        yield replaced
    finally:
        for label, space, before in saved:
            now = vars(space)
            shown = "" if label == "builtins" else f"{label}."
            for name, value in before.items():
                if not callable(value) or (label, name) in _CHANGES_ON_ITS_OWN:
                    continue  # functions and classes only: a module's own state (a counter, a cache) may change
                new = now.get(name, _MISSING)
                if new is not value and _unwrapped(new) is not value and not _torch_made(new):  # torch wraps some
                    # itself (manual_seed), and torch.compile patches Module (its patches are torch's, not the loop's)
                    setattr(space, name, value)
                    replaced.append(shown + name)
            if isinstance(space, type):
                for name in sorted(set(now) - set(before)):  # a method added over the inherited one (Tensor.add_)
                    if not callable(now[name]) or _torch_made(now[name]):
                        continue
                    delattr(space, name)
                    replaced.append(shown + name)


_TORCH = os.path.dirname(torch.__file__) + os.sep


def _torch_made(value: object) -> bool:
    """A function torch itself put there (torch.compile patches Module's __init__): its code is in torch's files."""
    code = getattr(_unwrapped(value), "__code__", None)
    return code is not None and code.co_filename.startswith(_TORCH)


def _unwrapped(value: object) -> object:
    try:
        return inspect.unwrap(value)
    except Exception:  # a cycle of __wrapped__, or an attribute that raises
        return value
