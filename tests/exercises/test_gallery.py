"""Developer notebook 3's checkers: the right answer passes, each typical wrong answer fails with its message."""
import pytest
import torch

from exercise_support import assert_incorrect
from widgets.exercises import gallery as exercises_gallery
from widgets.core.accumulation import is_update_step
from widgets.exercises.toolkit import Status
from widgets.exercises.gallery import gallery_exercises

GALLERY = gallery_exercises()


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
    assert GALLERY.my_loop.check(exercises_gallery.my_loop).correct
