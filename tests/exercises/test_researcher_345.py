"""The researcher tier II checkers: right answers pass, typical wrong ones fail with their reason."""
import contextlib

import pytest
import torch

from exercise_support import assert_incorrect
from widgets.exercises.researcher_3 import noise_exercises
from widgets.exercises.researcher_4 import memory_exercises
from widgets.exercises.researcher_5 import machines_exercises, one_update
from widgets.exercises.toolkit import Status

R3, R4, R5 = noise_exercises(), memory_exercises(), machines_exercises()


def test_count():
    assert len(R3) + len(R4) + len(R5) >= 6


@pytest.mark.parametrize("answer", [32, 32.0, torch.tensor(32.00001)])
def test_b_simple_right(answer):
    assert R3.b_simple.check(answer).correct


@pytest.mark.parametrize("answer, words", [(2.5, ["5 / 2"]), (3, ["numerator"]), (16, ["Unbias"]), (1, ["|G|^2"]),
                                           (7, ["is not it"])])
def test_b_simple_wrong(answer, words):
    assert_incorrect(R3.b_simple.check(answer), *words)


def test_critical():
    assert R3.critical.check((64, 50)).correct
    assert_incorrect(R3.critical.check((64, 25)), "infinite")
    assert_incorrect(R3.critical.check((1 / 64, 50)), "E_min / S_min")
    assert_incorrect(R3.critical.check(64), "two numbers")


def test_adam_bytes():
    assert R4.adam_bytes.check(24e9).correct
    assert_incorrect(R4.adam_bytes.check(18e9), "optimizer state alone")
    assert_incorrect(R4.adam_bytes.check(6e9), "16-bit weights and gradients")


def test_plan():
    assert R4.plan.check((8, 8)).correct
    assert_incorrect(R4.plan.check((16, 4)), "over the")
    assert_incorrect(R4.plan.check((4, 16)), "larger micro-batch")
    assert_incorrect(R4.plan.check((8, 4)), "target effective batch")


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
