"""Researcher notebook 5 (many machines): its checked exercises; `place_no_sync` runs against a stand-in for DDP."""
from __future__ import annotations

import contextlib
import copy

import torch

from widgets.core.accumulation import GRAD_ATOL, GRAD_RTOL  # the lab's one allclose rule
from widgets.exercises.passes import PassWatch, flat_parameters_grad, check_structure
from widgets.exercises.toolkit import Exercise, ExerciseSet, Feedback, close_to, correct, incorrect, two_numbers
from widgets.exercises.toolkit import not_attempted

GRAD_MB, WORKERS, K = 400.0, 8, 4


def _check_ring(answer: object) -> Feedback:
    one, update = two_numbers(answer, "(per_allreduce_mb, per_update_mb)")
    exact = 2 * (WORKERS - 1) / WORKERS * GRAD_MB
    if not close_to(one, exact):
        if close_to(one, GRAD_MB) or close_to(one, 2 * GRAD_MB):
            return incorrect("a ring all-reduce sends 2 (N - 1) / N of the gradient: a reduce-scatter and an "
                             "all-gather, each (N - 1) / N.")
        return incorrect(f"{one:g} MB is not 2 (N - 1) / N x 400 MB with N = 8.")
    if close_to(update, K * exact):
        return correct("700 MB per all-reduce; without no_sync DDP all-reduces after each of the 4 micro-steps: "
                       "2800 MB per update, where no_sync needs 700.")
    if close_to(update, exact):
        return incorrect("700 MB is the update with no_sync; without it every micro-step all-reduces.")
    return incorrect(f"{update:g} MB per update is not it: how many all-reduces happen per update without no_sync?")


class _StandInDDP(torch.nn.Module):
    """Wraps a module as DDP does: a forward while `require_backward_grad_sync` is False is not all-reduced."""

    def __init__(self, module: torch.nn.Module):
        super().__init__()
        self.module = module
        self.require_backward_grad_sync = True  # DDP's own flag: no_sync() is a context around it
        self.synced_forwards: list[bool] = []

    @contextlib.contextmanager
    def no_sync(self):
        old, self.require_backward_grad_sync = self.require_backward_grad_sync, False
        try:
            yield
        finally:
            self.require_backward_grad_sync = old

    def forward(self, *args, **kwargs):
        self.synced_forwards.append(bool(self.require_backward_grad_sync))  # DDP too decides at forward time
        return self.module(*args, **kwargs)


def _check_no_sync(answer: object) -> Feedback:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        net = torch.nn.Linear(3, 1)
        data, target = torch.randn(K * 2, 3), torch.randn(K * 2, 1)
    model = _StandInDDP(net)
    batches = [(data[i * 2:(i + 1) * 2], target[i * 2:(i + 1) * 2]) for i in range(K)]
    with torch.random.fork_rng(devices=[]), PassWatch(net) as watch:
        answer(model, batches)
    flags = model.synced_forwards
    if not flags and not watch.record.forwards:
        return not_attempted("your function never calls the model: fill in its body")
    if len(flags) < len(watch.record.forwards):
        return incorrect("some forwards went around the DDP wrapper (`model.module(x)`, or its weights directly): "
                         "DDP never sees those micro-steps. Call `model(x)`")
    if len(flags) != K:
        return incorrect(f"your function ran {len(flags)} forward passes; the update has {K} micro-batches")
    if not any(flags):
        return incorrect("every micro-step ran under no_sync: the workers never all-reduce, so each steps with "
                         "its own gradient and the replicas drift apart")
    if all(flags):
        return incorrect(f"no micro-step ran under no_sync: DDP all-reduces {K} times per update instead of once")
    if flags != [False] * (K - 1) + [True]:
        synced = [i for i, f in enumerate(flags) if f]
        return incorrect(f"the synced micro-steps are {synced}; only the last one (micro-step {K - 1}) may sync, "
                         "or the gradients added after the sync never reach the other workers")
    grad = flat_parameters_grad(net)
    check_structure(watch, [2] * K, "examples")
    last = watch.record.passes[-1] if watch.record.passes else []
    if len(flags) - 1 not in last:
        return incorrect("the synced micro-step's backward is not the last one: the gradients added after the "
                         "all-reduce never reach the other workers")
    ref = copy.deepcopy(net)  # the weights the answer ran with, without its .grad
    ref.zero_grad()
    torch.nn.functional.mse_loss(ref(data), target).backward()
    expected = flat_parameters_grad(ref)
    if grad is None or not torch.allclose(grad, expected, rtol=GRAD_RTOL, atol=GRAD_ATOL):
        return incorrect("no_sync is placed right, but .grad (weight and bias) is not the gradient of the mean loss "
                         "over the update: divide each micro-batch loss by K")
    return correct("K - 1 micro-steps under no_sync and the last one synced: one all-reduce per update, and the "
                   "same gradient, weight and bias, as without no_sync.")


def one_update(model, micro_batches) -> None:
    """Worked answer: accumulate K micro-batches, letting DDP all-reduce only on the last one."""
    K = len(micro_batches)
    for i, (x, y) in enumerate(micro_batches):
        is_last = i == K - 1  # the update boundary
        with contextlib.nullcontext() if is_last else model.no_sync():
            loss = torch.nn.functional.mse_loss(model(x), y) / K
            loss.backward()


def machines_exercises() -> ExerciseSet:
    """The exercises of researcher notebook 5."""
    return ExerciseSet("Many machines", [
        Exercise(
            name="ring", title="Ring all-reduce traffic",
            prompt="8 workers, a 400 MB gradient, K = 4 micro-steps per update. How many MB does each worker send in "
            "one ring all-reduce, and per update without no_sync? `ex.ring.check((per_allreduce, per_update))`.",
            checker=_check_ring,
            hints=["One ring all-reduce sends 2 (N - 1) / N of the gradient from each worker.",
             "Without no_sync, DDP all-reduces after every micro-step: K per update."],
            solution="per_allreduce = 2 * (8 - 1) / 8 * 400   # 700 MB\nper_update = 4 * per_allreduce   # 2800 MB",
            explanation="The ring costs almost twice the gradient per all-reduce, whatever N; no_sync divides the count by K.",
        ),
        Exercise(
            name="place_no_sync", title="Place no_sync",
            prompt="Write `one_update(model, micro_batches)` for a DDP-wrapped `model`: run every `(x, y)` micro-batch "
            "with an MSE loss divided by K so that DDP all-reduces only once per update. The checker runs it "
            "against a stand-in that records which micro-steps would sync: `ex.place_no_sync.check(one_update)`.",
            checker=_check_no_sync,
            hints=["`with model.no_sync():` around forward and backward skips the all-reduce of that micro-step.",
             "Skip it on every micro-step except the last of the update; use contextlib.nullcontext() there."],
            solution=one_update,
            explanation="The last micro-step's backward all-reduces the whole pile, so one sync per update is enough.",
        ),
    ])
