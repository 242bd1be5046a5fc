"""Every developer checker: the right answer passes, each typical wrong answer fails with its message."""
import pytest
import torch

from widgets import developer_exercises
from widgets.developer_exercises import loop_exercises, proof_exercises
from widgets.exercises import Status

PROOF = proof_exercises()
LOOP = loop_exercises()
mse = torch.nn.functional.mse_loss


def assert_incorrect(feedback, *words):
    assert feedback.status is Status.INCORRECT, feedback
    for word in words:
        assert word in feedback.message, (word, feedback.message)


@pytest.mark.parametrize("exercises", [PROOF, LOOP])
def test_every_exercise_reports_the_placeholder_as_not_attempted(exercises):
    for exercise in exercises:
        assert exercise.check(...).status is Status.NOT_ATTEMPTED
        assert exercise.hint(1).text and exercise.solution().code


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
    (accumulate(micro=4, divide_by=4), ["sizes [4, 4, 4, 4]"]),
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


# --- boundary ------------------------------------------------------------------------------

def test_boundary_correct():
    def is_boundary(m, k, t):
        return (m + 1) % k == 0 or m == t - 1
    assert LOOP.boundary.check(is_boundary).correct


@pytest.mark.parametrize("answer, words", [
    (lambda m, k, t: (m + 1) % k == 0, ["never updates", "total_micro_steps - 1"]),
    (lambda m, k, t: m % k == 0, ["micro_step 0, K, 2K"]),
    (lambda m, k, t: m % k == 0 or m == t - 1, ["micro_step 0, K, 2K"]),
    (lambda m, k, t: m == t - 1, ["for micro_step=0, accumulation_steps=1"]),
])
def test_boundary_wrong(answer, words):
    assert_incorrect(LOOP.boundary.check(answer), *words)


def test_boundary_returning_none_is_not_attempted():
    assert LOOP.boundary.check(lambda m, k, t: None).status is Status.NOT_ATTEMPTED


# --- tail_weights --------------------------------------------------------------------------

@pytest.mark.parametrize("answer", [[8 / 19, 8 / 19, 3 / 19], torch.tensor([8, 8, 3]) / 19])
def test_tail_weights_correct(answer):
    assert LOOP.tail_weights.check(answer).correct


@pytest.mark.parametrize("answer, words", [
    ([0.25, 0.25, 0.25], ["configured K = 4", "under-weighted"]),
    ([1 / 3] * 3, ["Weight by size"]),
    ([8 / 32, 8 / 32, 3 / 32], ["divided by 32"]),
    ([8, 8, 3], ["sizes themselves"]),
    ([0.5, 0.5, 0.5], ["sum to 1.5"]),
    ([0.5, 0.3, 0.2], ["not proportional"]),
    ([0.5, 0.5], ["3 of them, got 2"]),
])
def test_tail_weights_wrong(answer, words):
    assert_incorrect(LOOP.tail_weights.check(answer), *words)


# --- update_loss ---------------------------------------------------------------------------

def test_update_loss_correct():
    def update_loss(losses, sizes):
        return sum(l * n for l, n in zip(losses, sizes)) / sum(sizes)
    assert LOOP.update_loss.check(update_loss).correct


@pytest.mark.parametrize("answer, words", [
    (lambda ls, ns: ls[-1], ["last micro-batch's loss alone", "tutorials"]),
    (lambda ls, ns: ls[-1] * len(ls), ["K times the last micro-batch's loss"]),
    (lambda ls, ns: sum(ls) / len(ls) / len(ls), ["divided loss"]),
    (lambda ls, ns: ls[-1] / len(ls), ["divided loss"]),
    (lambda ls, ns: sum(ls), ["K times too big"]),
    (lambda ls, ns: sum(ls) / len(ls), ["same size", "weight each loss by its size"]),
    (lambda ls, ns: 1.0, ["your function gives 1"]),
])
def test_update_loss_wrong(answer, words):
    assert_incorrect(LOOP.update_loss.check(answer), *words)


# --- clip_position, warmup_end -------------------------------------------------------------

@pytest.mark.parametrize("answer", ["B", " b "])
def test_clip_position_correct(answer):
    assert LOOP.clip_position.check(answer).correct


@pytest.mark.parametrize("answer, words", [
    ("A", ["every backward"]), ("C", ["after optimizer.step()"]), ("D", ["after zero_grad"]), ("E", ["one of the letters"]),
    (2, ["one of the letters"]),
])
def test_clip_position_wrong(answer, words):
    assert_incorrect(LOOP.clip_position.check(answer), *words)


def test_warmup_end():
    assert LOOP.warmup_end.check(25).correct
    assert_incorrect(LOOP.warmup_end.check(100), "once per update")
    assert_incorrect(LOOP.warmup_end.check(400), "sooner, not later")
    assert_incorrect(LOOP.warmup_end.check(4), "4 is K")
    assert_incorrect(LOOP.warmup_end.check(50), "50 updates is not it")


# --- amp_order -----------------------------------------------------------------------------

def test_amp_order_correct_accepts_the_real_call_names():
    assert LOOP.amp_order.check(["backward", "backward", "unscale", "clip", "step", "update", "zero_grad"]).correct
    spelled = ["backward", "backward", "scaler.unscale_", "clip", "scaler.step", "scaler.update()", "optimizer.zero_grad()"]
    assert LOOP.amp_order.check(spelled).correct


@pytest.mark.parametrize("answer, words", [
    (["backward", "unscale", "backward", "unscale", "clip", "step", "update", "zero_grad"], ["raises RuntimeError"]),
    (["backward", "unscale", "backward", "clip", "step", "update", "zero_grad"], ["before the last backward"]),
    (["backward", "backward", "clip", "step", "update", "zero_grad"], ["without unscale_"]),
    (["backward", "backward", "clip", "unscale", "step", "update", "zero_grad"], ["clipping before unscale_"]),
    (["backward", "zero_grad", "backward", "unscale", "clip", "step", "update"], ["wipes the first"]),
    (["backward", "backward", "unscale", "step", "clip", "update", "zero_grad"], ["after the step"]),
    (["backward", "backward", "unscale", "clip", "update", "step", "zero_grad"], ["update() before step()"]),
    (["backward", "backward", "unscale", "clip", "step", "zero_grad"], ["['update']"]),
    (["backward", "unscale", "clip", "step", "update", "zero_grad"], ["not 1 times"]),
    (["backward", "backward", "unscale", "clip", "step", "update", "zero_grad", "explode"], ["unknown call"]),
    ("backward", ["pass a list"]),
])
def test_amp_order_wrong(answer, words):
    assert_incorrect(LOOP.amp_order.check(answer), *words)


# --- gallery: sum_reduction, my_loop -------------------------------------------------------

from widgets.accumulation import is_update_step  # noqa: E402
from widgets.developer_exercises import gallery_exercises  # noqa: E402

GALLERY = gallery_exercises()


def test_gallery_placeholders_are_not_attempted():
    for exercise in GALLERY:
        assert exercise.check(...).status is Status.NOT_ATTEMPTED


def test_sum_reduction():
    assert GALLERY.sum_reduction.check(1 / 32).correct
    assert_incorrect(GALLERY.sum_reduction.check(1 / 4), "1/K assumes a mean-reduced loss", "8x")
    assert_incorrect(GALLERY.sum_reduction.check(1 / 8), "1/b", "4x too big")
    assert_incorrect(GALLERY.sum_reduction.check(1), "32x too big")
    assert_incorrect(GALLERY.sum_reduction.check(1 / 128), "divides by K twice")
    assert_incorrect(GALLERY.sum_reduction.check(0.1), "3.2x the big-batch gradient")


def make_loop(divide="group", scheduler_every_micro_step=False, log="mean", clip="per_update"):
    """A learner's loop; the defaults are right, each option is one classic mistake."""
    def my_loop(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
        logged, losses = [], []
        for i, (x, y) in enumerate(batches):
            group_size = min(accumulation_steps, len(batches) - (i - i % accumulation_steps))
            loss = loss_fn(model(x), y)
            (loss / {"group": group_size, "K": accumulation_steps, "none": 1}[divide]).backward()
            losses.append(loss.item())
            if clip == "per_micro_step":
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            if is_update_step(i, accumulation_steps, len(batches)):
                if clip == "per_update":
                    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()
                if scheduler is not None and not scheduler_every_micro_step:
                    scheduler.step()
                optimizer.zero_grad(set_to_none=True)
                logged.append(sum(losses) / len(losses) if log == "mean" else losses[-1])
                losses = []
            if scheduler is not None and scheduler_every_micro_step:
                scheduler.step()
        return logged
    return my_loop


def test_my_loop_correct():
    feedback = GALLERY.my_loop.check(make_loop())
    assert feedback.correct and "logged losses are the update means" in feedback.message


def test_my_loop_that_logs_nothing_is_correct_but_asked_to_return_its_log():
    def quiet(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
        make_loop()(model, optimizer, loss_fn, batches, accumulation_steps, scheduler)
    feedback = GALLERY.my_loop.check(quiet)
    assert feedback.correct and "Return the mean loss of each update" in feedback.message


@pytest.mark.parametrize("loop, words", [
    (make_loop(divide="none"), ["loss_not_divided", "accumulation_steps = 4, 10 micro-batches"]),
    (make_loop(divide="K"), ["tail_divided_by_k"]),
    (make_loop(scheduler_every_micro_step=True), ["scheduler_every_micro_step", "with_scheduler=True"]),
    (make_loop(log="last"), ["log_last_micro_batch"]),
    (make_loop(clip="per_micro_step"), ["clip_every_micro_step"]),
    (make_loop(clip=None), ["clip_missing"]),
    (lambda model, optimizer, loss_fn, batches, accumulation_steps: make_loop()(model, optimizer, loss_fn, batches,
                                                                               accumulation_steps),
     ["TypeError", "scheduler"]),
    ("my_loop", ["pass the function itself"]),
])
def test_my_loop_wrong(loop, words):
    assert_incorrect(GALLERY.my_loop.check(loop), *words)


def test_my_loop_with_an_empty_body_is_not_attempted():
    def my_loop(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
        ...
    assert GALLERY.my_loop.check(my_loop).status is Status.NOT_ATTEMPTED


def test_my_loop_solution_passes_its_own_checker():
    assert GALLERY.my_loop.check(developer_exercises.my_loop).correct


@pytest.mark.parametrize("exercises, name, worked", [
    (PROOF, "impersonate_16", "accumulate_16"),
    (LOOP, "boundary", "is_boundary"),
    (LOOP, "update_loss", "update_loss"),
    (GALLERY, "my_loop", "my_loop"),
])
def test_each_worked_answer_passes_and_is_the_solution_shown(exercises, name, worked):
    function = getattr(developer_exercises, worked)
    exercise = getattr(exercises, name)
    assert exercise.check(function).correct
    assert exercise.solution().code.startswith(f"def {worked}(")
