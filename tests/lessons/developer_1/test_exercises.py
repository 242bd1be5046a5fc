"""Developer notebook 1's checkers: the right answer passes, each typical wrong answer fails with its message."""
import contextlib

import pytest
import torch

from tests.exercises.exercise_support import assert_incorrect
from widgets.exercises.toolkit import Status
from widgets.lessons.developer_1.exercises import proof_exercises, sync_context

PROOF = proof_exercises()
mse = torch.nn.functional.mse_loss


# --- ratio ---------------------------------------------------------------------------------

@pytest.mark.parametrize("answer", [4, 4.0000005, torch.tensor([[4.0, 4.0, 4.0, 4.0000005]])])
def test_ratio_correct(answer):
    assert PROOF.ratio.check(answer).correct


@pytest.mark.parametrize("answer, words", [
    (1, ["division is still there"]),
    (0.25, ["upside down"]),
    (2, ["micro_batch_size"]),
    (8, ["number of examples"]),
    (16, ["multiplied"]),
    (3, ["Count how many"]),
    (torch.tensor([4.0, 1.0]), ["not proportional"]),
    (torch.tensor([float("nan")]), ["inf or nan"]),
    ("four", ["must be a number"]),
])
def test_ratio_wrong(answer, words):
    assert_incorrect(PROOF.ratio.check(answer), *words)


# --- impersonate_16 ------------------------------------------------------------------------

def accumulate(divide_by=8, micro=2, count=None, zero_grad=False):
    def accumulate_16(model, data, target):
        starts = list(range(0, 16, micro))[: count]
        for i in starts:
            if zero_grad:
                model.zero_grad()
            (mse(model(data[i:i + micro]), target[i:i + micro]) / divide_by).backward()
    return accumulate_16


def test_impersonate_correct_and_leaves_global_random_state_alone():
    torch.manual_seed(123)
    before = torch.random.get_rng_state()
    assert PROOF.impersonate_16.check(accumulate()).correct
    assert torch.equal(before, torch.random.get_rng_state())


@pytest.mark.parametrize("answer, words", [
    (accumulate(divide_by=4), ["2x", "K = 8"]),
    (accumulate(divide_by=1), ["8x", "not divided"]),
    (accumulate(divide_by=16), ["half", "number of examples"]),
    (accumulate(divide_by=64), ["1/8", "twice"]),
    (accumulate(divide_by=3), ["2.667x"]),
    (accumulate(micro=4, divide_by=4), ["carried [4, 4, 4, 4]"]),
    (accumulate(micro=16, divide_by=1), ["reference itself"]),
    (accumulate(count=4), ["cover 8 of the 16"]),
    (accumulate(zero_grad=True), ["only the last micro-batch"]),
    (lambda model, data, target: model(data[:2]), ["left .grad empty"]),
    (torch.zeros(3), ["pass the function itself"]),
])
def test_impersonate_wrong(answer, words):
    assert_incorrect(PROOF.impersonate_16.check(answer), *words)


def test_impersonate_empty_function_is_not_attempted():
    assert PROOF.impersonate_16.check(lambda model, data, target: None).status is Status.NOT_ATTEMPTED


def test_impersonate_crash_is_reported():
    def crashes(model, data, target):
        raise RuntimeError("shapes do not match")
    assert_incorrect(PROOF.impersonate_16.check(crashes), "RuntimeError", "shapes do not match")


def test_the_worked_answer_and_its_pasted_source_pass():
    from widgets.lessons.developer_1.exercises import accumulate_16

    shown = PROOF.impersonate_16.solution(anyway=True).code  # what a learner would paste
    pasted = {"torch": torch}
    exec(compile(shown, "<pasted cell>", "exec"), pasted)
    assert PROOF.impersonate_16.check(accumulate_16).correct
    assert PROOF.impersonate_16.check(pasted["accumulate_16"]).correct


torch.manual_seed(0)
data16, target16 = torch.randn(16, 4), torch.randn(16, 1)  # the notebook's demonstration data
micro_batch_size, accumulation_steps = 2, 4  # the notebook's demonstration, section 3


def uses_the_notebook_data(model, data, target):
    for i in range(0, 16, 2):  # copied from the notebook's worked cell: it reads data16, not data
        (mse(model(data16[i:i + 2]), target16[i:i + 2]) / 8).backward()


def demo_loop_as_a_function(model, data, target):
    for i in range(0, 8, micro_batch_size):  # section 3's cell, pasted into the body
        loss = mse(model(data[i:i + micro_batch_size]), target[i:i + micro_batch_size])
        (loss / accumulation_steps).backward()


def summed_then_one_backward(model, data, target):
    losses = [mse(model(data[i:i + 2]), target[i:i + 2]) / 8 for i in range(0, 16, 2)]
    sum(losses).backward()  # micro-batches on the way in, one big backward at the end


@pytest.mark.parametrize("answer, words", [
    (uses_the_notebook_data, ["notebook's own 16 examples", "Use only the function's arguments"]),
    (demo_loop_as_a_function, ["cover 8 of the 16"]),
    (summed_then_one_backward, ["1 backward pass(es) for 8 forwards", "16 examples", "memory of the big batch"]),
])
def test_copies_of_the_demonstration_and_a_secret_big_backward_are_rejected_for_what_they_do(answer, words):
    assert_incorrect(PROOF.impersonate_16.check(answer), *words)


def test_weighting_each_micro_batch_by_its_share_is_accepted():
    def by_share(model, data, target):
        for i in range(0, 16, 2):
            (mse(model(data[i:i + 2]), target[i:i + 2]) * (2 / 16)).backward()
    assert PROOF.impersonate_16.check(by_share).correct


def test_a_helper_from_a_cell_not_run_yet_says_what_to_run_first():
    def uses_fresh_model(model, data, target):
        fresh_model()  # noqa: F821 - defined by a notebook cell that has not run
    feedback = PROOF.impersonate_16.check(uses_fresh_model)
    assert feedback.status is Status.RUN_EARLIER_CELLS and "`fresh_model`" in feedback.message


# --- disguised big batches, hand-written gradients, and right answers written unusually ------

def big_batch_through_forward(model, data, target):
    mse(model.forward(data), target).backward()  # around the module's hooks


def big_batch_through_f_linear(model, data, target):
    mse(torch.nn.functional.linear(data, model.weight, model.bias), target).backward()


def big_batch_by_hand(model, data, target):
    mse(data @ model.weight.T + model.bias, target).backward()


def closed_form_written(model, data, target):
    with torch.no_grad():  # the MSE gradient worked out on paper, written into .grad
        residual = data @ model.weight.T + model.bias - target
        model.weight.grad = 2 * (residual * data).mean(0, keepdim=True)
        model.bias.grad = 2 * residual.mean(0)


def whole_pass_plus_dummy_call(model, data, target):
    mse(model(data), target).backward()
    model(data[:2])


def on_a_copy(model, data, target):
    import copy
    twin = copy.deepcopy(model)
    mse(twin(data), target).backward()
    for p, q in zip(model.parameters(), twin.parameters()):
        p.grad = q.grad.clone()


def hard_coded_table(model, data, target):
    table = {0.0: 1.0}  # answers for the notebook's example only
    for p in model.parameters():
        p.grad = torch.full_like(p, table[0.0])


@pytest.mark.parametrize("answer, words", [
    (big_batch_through_forward, ["reference itself"]),
    (big_batch_through_f_linear, ["reference itself"]),
    (big_batch_by_hand, ["reference itself"]),
    (closed_form_written, ["written by hand"]),
    (whole_pass_plus_dummy_call, ["reference itself"]),
    (on_a_copy, ["written by hand"]),
    (hard_coded_table, ["written by hand"]),
])
def test_disguised_big_batches_and_written_gradients_are_seen(answer, words):
    assert_incorrect(PROOF.impersonate_16.check(answer), *words)


def with_autograd_grad(model, data, target):
    params = list(model.parameters())
    for i in range(0, 16, 2):
        grads = torch.autograd.grad(mse(model(data[i:i + 2]), target[i:i + 2]), params)
        for p, g in zip(params, grads):  # each micro-batch's mean gradient, weighted 1/8, piled by hand
            p.grad = g / 8 if p.grad is None else p.grad + g / 8


def with_torch_func(model, data, target):
    params = {k: v.detach() for k, v in model.named_parameters()}
    for i in range(0, 16, 2):
        x, y = data[i:i + 2], target[i:i + 2]
        grads = torch.func.grad(lambda p, x=x, y=y: mse(torch.func.functional_call(model, p, (x,)), y))(params)
        for k, p in model.named_parameters():
            p.grad = grads[k] / 8 if p.grad is None else p.grad + grads[k] / 8


def with_f_linear_micro_batches(model, data, target):
    for i in range(0, 16, 2):
        out = torch.nn.functional.linear(data[i:i + 2], model.weight, model.bias)
        (mse(out, target[i:i + 2]) / 8).backward()


def with_a_while_loop_and_sum_reduction(model, data, target):
    i = 0
    while i < len(data):
        (mse(model(data[i:i + 2]), target[i:i + 2], reduction="sum") / 16).backward()
        i += 2


@pytest.mark.parametrize("answer", [with_autograd_grad, with_torch_func, with_f_linear_micro_batches,
                                    with_a_while_loop_and_sum_reduction])
def test_right_answers_written_in_unusual_ways_are_accepted(answer):
    feedback = PROOF.impersonate_16.check(answer)
    assert feedback.correct, feedback


def test_an_answer_that_never_returns_is_stopped_and_hostile_answers_are_reported(monkeypatch):
    from widgets.exercises import passes

    monkeypatch.setattr(passes, "TIME_LIMIT_S", 0.2)

    def never_returns(model, data, target):
        while True:
            model(data[:2])
    assert_incorrect(PROOF.impersonate_16.check(never_returns), "TimeoutError", "time limit")

    class Hostile:
        def __call__(self, *args):
            raise RuntimeError("no")

        def __repr__(self):
            raise RuntimeError("no")
    for answer in (Hostile(), "123", [1, 2]):
        assert PROOF.impersonate_16.check(answer).status is Status.INCORRECT


# --- no_sync -------------------------------------------------------------------------------

def _context(sync_when):
    """A `sync_context` answer that runs outside no_sync exactly where `sync_when(micro_step, window_size)` holds."""
    def sync_context(model, micro_step, window_size):
        return contextlib.nullcontext() if sync_when(micro_step, window_size) else model.no_sync()
    return sync_context


def _the_other_way_round(model, micro_step, window_size):
    return model.no_sync() if micro_step < window_size - 1 else contextlib.ExitStack()


def _by_getattr(model, micro_step, window_size):
    skip = window_size - micro_step > 1
    return getattr(model, "no_sync", contextlib.nullcontext)() if skip else contextlib.suppress(KeyError)


@pytest.mark.parametrize("answer", [_context(lambda i, n: i == n - 1), _context(lambda i, n: i + 1 == n),
                                    _context(lambda i, n: not i < n - 1), _the_other_way_round, _by_getattr])
def test_no_sync_correct_in_unusual_forms(answer):
    assert PROOF.no_sync.check(answer).correct


def _uncalled(model, micro_step, window_size):
    return contextlib.nullcontext() if micro_step == window_size - 1 else model.no_sync


def _entered_inside(model, micro_step, window_size):
    if micro_step < window_size - 1:
        with model.no_sync():
            pass


@pytest.mark.parametrize("answer, words", [
    (_context(lambda i, n: i % 4 == 3), ["short last window of 2", "not with K"]),  # K hard-coded
    (_context(lambda i, n: i == 3), ["short last window of 2"]),
    (_context(lambda i, n: i == n), ["never all-reduce"]),  # off by one: never syncs
    (_context(lambda i, n: False), ["never all-reduce"]),
    (_context(lambda i, n: True), ["micro-step ran under no_sync", "4 times per update"]),
    (_context(lambda i, n: i == 0), ["synced micro-steps are [0]", "never reach the other ranks"]),
    (_context(lambda i, n: i != n - 1), ["[0, 1, 2]", "never reach the other ranks"]),  # upside down
    (_context(lambda i, n: i >= n - 2), ["[2, 3]", "only on the last one"]),
    (_uncalled, ["call it", "model.no_sync()"]),
    (lambda model, i, n: i == n - 1, ["returned bool", "contextlib.nullcontext()"]),
    (_entered_inside, ["returned None", "with"]),
])
def test_no_sync_wrong_answers_say_what_is_wrong(answer, words):
    assert_incorrect(PROOF.no_sync.check(answer), *words)


def test_no_sync_blank_is_not_attempted_and_the_solution_passes():
    assert PROOF.no_sync.check(lambda model, i, n: ...).status is Status.NOT_ATTEMPTED
    assert PROOF.no_sync.check(sync_context).correct
