"""The auditor on round four's corpus (tests/audit/round_four_loops.py, written by another hand, its truth
proved without the auditor in test_round_four_truth.py): weight hooks, torch.func and torch.autograd.grad
piles, a loop's own buffer, running means, compiled models, float32 factors, two forwards per micro-batch,
graphs and outputs kept, and what a report says.

A right loop passes; a wrong one is flagged, and its first finding, like every other, is one the corpus
allows. A report never says "could not read", never names a file as the place, never says what the corpus
marks false for that loop, and its counts are the loop's own, counted here by plain hooks and wrappers on a run of the same loop.
"""
from __future__ import annotations

import re
import threading

import pytest
import torch

from tests.audit.round_four_loops import HANGS, LOOPS, audit_options
from widgets.audit import audit_training_loop
from widgets.audit.problems import AuditSetup, make_problem
from widgets.core.mistakes import EVERY_MISTAKE


CASES = [pytest.param(case, setting, id=f"{case.name}-K{setting.K}{'-tail' if setting.tail else ''}"
                      f"{f'-W{setting.world_size}' if setting.world_size > 1 else ''}")
         for case in LOOPS for setting in case.settings]


def first_name(report) -> str:
    """The name of the report's first finding (findings are sentences that begin with the mistake's words)."""
    text = report.findings[0].lower()
    return next(name for name in report.mistakes if text.startswith(EVERY_MISTAKE[name].does.lower()[:30]))


class Counted(torch.optim.SGD):
    """Plain SGD that counts its calls."""

    def __init__(self, params):
        super().__init__(params, lr=0.05)
        self.steps = self.zero_grads = 0

    def step(self, closure=None):
        self.steps += 1
        return super().step(closure)

    def zero_grad(self, set_to_none: bool = True):
        self.zero_grads += 1
        super().zero_grad(set_to_none)


def what_the_loop_did(case, setting) -> dict:
    """The loop run on the auditor's problem with nothing but counters: its calls and its returned log."""
    problem = make_problem(AuditSetup(setting.K, setting.num_batches, case.clip_norm, problem=case.problem))
    model = problem.task.new_model()
    with torch.no_grad():
        model.weight.zero_()
    optimizer, passes, zeroed = Counted(model.parameters()), [0], [0]
    model.weight.register_post_accumulate_grad_hook(lambda p: passes.__setitem__(0, passes[0] + 1))
    plain_zero_grad = model.zero_grad
    model.zero_grad = lambda set_to_none=True: (zeroed.__setitem__(0, zeroed[0] + 1), plain_zero_grad(set_to_none))
    batches = [(x.clone(), y.clone()) for x, y in problem.batches]
    log = case.loop(model, optimizer, problem.task.loss_fn, batches, setting.K)
    return {"backward passes": passes[0], "optimizer.step()": optimizer.steps,
            "zero_grad()": optimizer.zero_grads + zeroed[0], "log": None if log is None else len(list(log))}


@pytest.mark.slow  # about 200 audits, a compiled model among them
@pytest.mark.parametrize("case, setting", CASES)
def test_round_four(case, setting):
    if case.family == "compiled":
        # each audit's model is a new class: past dynamo's recompile limit (8) a compiled loop would run
        # uncompiled, and the test would no longer test torch.compile
        torch.compiler.reset()
    report = audit_training_loop(case.loop, setting.K, **audit_options(case, setting))
    text = str(report)
    if case.correct:
        assert report.matches_reference, text
    else:
        assert report.mistakes, text
        if case.expected is not None:
            assert first_name(report) in case.expected, text
            assert report.mistakes <= case.expected, text  # no second finding the loop does not make
    assert "could not read" not in text, text
    assert not re.search(r"\w\.py\b", "\n".join(report.findings)), text  # the place is the learner's line
    assert not [phrase for phrase in case.never_says if phrase in text.lower()], text
    if setting.world_size == 1 and case.shows != HANGS:  # every count is the loop's own
        did = what_the_loop_did(case, setting)
        assert {name: yours for name, (yours, _) in report.counts.items()} == \
            {name: did[name] for name in report.counts}, text
        for logged, _ in re.findall(r"(\d+) values( or more)? for \d+ updates", text):
            assert int(logged) == did["log"], text
        for u in re.findall(r"\bupdate (\d+)\b", "\n".join(report.findings)):
            assert int(u) < did["optimizer.step()"], text  # never an update the loop did not make
    assert not [t for t in threading.enumerate() if t.name.startswith("audit-rank")]


def test_what_the_auditor_does_not_check_an_ema_updated_every_micro_batch_passes():
    """The auditor judges the updates the model receives; an EMA of the weights beside them (here updated on
    every micro-batch, where once per update is meant) is out of its sight, as its docstring and developer_3 say."""
    import copy

    def ema_every_micro_batch(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
        ema = copy.deepcopy(model)
        for start in range(0, len(batches), accumulation_steps):
            window = batches[start : start + accumulation_steps]
            examples = sum(len(y) for _, y in window)
            for x, y in window:
                (loss_fn(model(x), y) * len(y) / examples).backward()
                with torch.no_grad():  # wrong: once per micro-batch, not once per update
                    for e, p in zip(ema.parameters(), model.parameters()):
                        e.mul_(0.9).add_(p, alpha=0.1)
            optimizer.step()
            optimizer.zero_grad()

    assert audit_training_loop(ema_every_micro_batch, 4).matches_reference


def _windows(batches, K):
    for start in range(0, len(batches), K):
        window = batches[start : start + K]
        yield window, sum(len(y) for _, y in window)


def hook_clamps(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    for p in model.parameters():
        p.register_hook(lambda g: g.clamp(-0.5, 0.5))  # no multiple of the gradient: no loss scale explains it
    for window, examples in _windows(batches, accumulation_steps):
        for x, y in window:
            (loss_fn(model(x), y) * len(y) / examples).backward()
        optimizer.step()
        optimizer.zero_grad()


def clips_by_hand(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None, every_micro_step=False):
    def clip():
        norm = torch.linalg.vector_norm(torch.cat([p.grad.reshape(-1) for p in model.parameters()]))
        for p in model.parameters():
            p.grad.mul_(min(1.0, 1.0 / (float(norm) + 1e-6)))

    for window, examples in _windows(batches, accumulation_steps):
        for x, y in window:
            (loss_fn(model(x), y) * len(y) / examples).backward()
            if every_micro_step:
                clip()
        if not every_micro_step:
            clip()
        optimizer.step()
        optimizer.zero_grad()


@pytest.mark.parametrize("K, num_batches", [(3, 7), (3, 6), (4, 10), (4, 8)])
def test_a_hook_that_is_no_scale_and_a_clip_by_hand(K, num_batches):
    report = audit_training_loop(hook_clamps, K, num_batches=num_batches)
    assert report.mistakes == {"unexpected_gradient"} and "a hook of your loop" in report.findings[0], str(report)
    assert audit_training_loop(clips_by_hand, K, num_batches=num_batches, clip_norm=1.0).matches_reference
    every = audit_training_loop(lambda *a, **k: clips_by_hand(*a, **k, every_micro_step=True), K,
                                num_batches=num_batches, clip_norm=1.0)
    assert every.mistakes == {"clip_every_micro_step"}, str(every)
