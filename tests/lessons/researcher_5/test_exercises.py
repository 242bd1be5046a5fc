"""researcher_5's checkers: right answers pass, typical wrong ones fail with their reason."""
import contextlib

import torch

from tests.exercises.exercise_support import assert_incorrect
from widgets.exercises.toolkit import Status
from widgets.lessons.researcher_5.exercises import machines_exercises, one_update

R5 = machines_exercises()


def test_count():
    assert len(R5) >= 2


def test_ring():
    assert R5.ring.check((700, 2800)).correct
    assert_incorrect(R5.ring.check((700, 700)), "with no_sync")
    assert_incorrect(R5.ring.check((400, 1600)), "2 (N - 1) / N")


def _update(sync_on, divide=True):
    def one_update(model, micro_batches):
        K = len(micro_batches)
        for i, (x, y) in enumerate(micro_batches):
            with contextlib.nullcontext() if i in sync_on else model.no_sync():
                loss = torch.nn.functional.mse_loss(model(x), y)
                (loss / K if divide else loss).backward()
    return one_update


def test_place_no_sync():
    assert R5.place_no_sync.check(_update({3})).correct  # the package's own solution is refused by the toolkit
    assert "no_sync" in R5.place_no_sync.solution().code and one_update.__name__ == "one_update"
    assert_incorrect(R5.place_no_sync.check(_update({0})), "only the last one")
    assert_incorrect(R5.place_no_sync.check(_update(set())), "never all-reduce")
    assert_incorrect(R5.place_no_sync.check(_update({0, 1, 2, 3})), "4 times per update")
    assert_incorrect(R5.place_no_sync.check(_update({3}, divide=False)), "divide each micro-batch loss by K")
    assert R5.place_no_sync.check(lambda model, batches: None).status is Status.NOT_ATTEMPTED
    assert_incorrect(R5.place_no_sync.check(3), "pass the function itself")


def _sets_the_flag(model, micro_batches):
    K = len(micro_batches)
    for i, (x, y) in enumerate(micro_batches):
        model.require_backward_grad_sync = i == K - 1  # what no_sync() does, written out
        (torch.nn.functional.mse_loss(model(x), y) / K).backward()
    model.require_backward_grad_sync = True


def _only_the_weight_divided(model, micro_batches):
    K = len(micro_batches)
    for i, (x, y) in enumerate(micro_batches):
        with contextlib.nullcontext() if i == K - 1 else model.no_sync():
            torch.nn.functional.mse_loss(model(x), y).backward()
    model.module.weight.grad /= K  # the bias keeps K x its gradient


def _around_the_wrapper(model, micro_batches):
    for x, y in micro_batches:
        (torch.nn.functional.mse_loss(model.module(x), y) / len(micro_batches)).backward()


def _flags_right_one_big_backward(model, micro_batches):
    K = len(micro_batches)
    losses = []
    for i, (x, y) in enumerate(micro_batches):
        with contextlib.nullcontext() if i == K - 1 else model.no_sync():
            losses.append(torch.nn.functional.mse_loss(model(x), y) / K)
    sum(losses).backward()


def test_place_no_sync_accepts_the_flag_set_directly_and_sees_every_parameter_and_pass():
    assert R5.place_no_sync.check(_sets_the_flag).correct
    assert R5.place_no_sync.check(_only_the_weight_divided).status is Status.INCORRECT
    assert_incorrect(R5.place_no_sync.check(_around_the_wrapper), "around the DDP wrapper")
    assert_incorrect(R5.place_no_sync.check(_flags_right_one_big_backward), "4 micro-batches at once")
