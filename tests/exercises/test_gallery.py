"""Developer notebook 3's checkers: the right answer passes, each typical wrong answer fails with its message."""
import inspect

import pytest
import torch

from exercise_support import assert_incorrect
from loops import make_loop
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


# --- my_loop: every correct variant passes, each fault is named for what the loop did -------

@pytest.mark.parametrize("options", [
    {},  # each loss x n_i/n before backward, zero_grad after the step
    {"scale": "boundary_share"},  # loss x n_i, .grad / n at the update, then the clip
    {"zero_grad": "group_start"},  # the pile cleared when a group starts instead of after the step
    {"scale": "boundary_share", "zero_grad": "group_start"},
])
def test_my_loop_accepts_every_correct_variant(options):
    feedback = GALLERY.my_loop.check(make_loop(**options))
    assert feedback.correct, feedback
    assert "n_i/n" in feedback.message and "mean loss" in feedback.message


@pytest.mark.parametrize("options, words", [
    ({"log": None}, ["returns nothing", "mean loss of each update"]),  # skipping the required log fails
    ({"backward": "group_sum"}, ["one backward() went through 4 micro-batches at once (20 examples)", "memory"]),
    ({"backward": "concat"}, ["on 20 examples at once"]),
    ({"scale": "count"}, ["K = 3", "hold [5, 2] examples", "n_i/n", "same only when they are all the same size"]),
    ({"scale": "boundary_count"}, ["hold [5, 2] examples"]),
    ({"scale": "K"}, ["K = 4 and 10 micro-batches", "divided by K = 4, but it holds 2 micro-batches"]),
    ({"scale": "none"}, ["update 1", "undivided", "4x the gradient of its mean loss"]),
    ({"scale": "none", "clip": None}, ["norm 16, above clip_norm = 1", "Also: each micro-batch's loss of update 0 "
                                       "reached backward() undivided"]),  # the gallery's first exhibit: both faults
    ({"scale": "boundary_share", "clip": "before_rescale"}, ["after clipping", "Rescale first, then clip"]),
    ({"scale": "boundary_share", "clip": None}, ["above clip_norm = 1"]),
    ({"clip": None}, ["above clip_norm = 1"]),
    ({"clip": "every_micro_step"}, ["shrunk before micro-batch", "half-built pile"]),
    ({"zero_grad": "every_micro_step"}, [".grad was empty before micro-batch 1"]),
    ({"zero_grad": None}, ["update 1 began with the previous update's gradient"]),
    ({"step": "every"}, ["after every micro-step (10 steps, not 3)"]),
    ({"step": "no_tail"}, ["never got its optimizer.step()"]),
    ({"scheduler_at": "micro_step"}, ["every micro-step (8 times for 3 updates)"]),
    ({"log": "plain"}, ["plain mean", "right only when the micro-batches are all the same size", "[5, 2]"]),
    ({"log": "last"}, ["the last micro-batch's loss"]),
    ({"log": "divided"}, ["the divided loss", "4x too small"]),
])
def test_my_loop_names_the_fault_of_each_wrong_loop(options, words):
    assert_incorrect(GALLERY.my_loop.check(make_loop(**options)), *words)


def test_my_loop_of_the_package_handed_back_wrapped_or_pasted_is_rejected():
    from widgets.exercises.gallery import my_loop

    shown = GALLERY.my_loop.solution(anyway=True).code
    pasted = {"torch": torch, "is_update_step": is_update_step}
    exec(compile(shown, "<pasted cell>", "exec"), pasted)  # the learner's cell, not the package's code

    def wrapper(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
        return my_loop(model, optimizer, loss_fn, batches, accumulation_steps, scheduler)

    assert_incorrect(GALLERY.my_loop.check(my_loop), "package's own `my_loop`")
    assert_incorrect(GALLERY.my_loop.check(wrapper), "calls the package's `my_loop`")
    assert_incorrect(GALLERY.my_loop.check(pasted["my_loop"]), "copied line for line")


def test_the_gallerys_fixed_loop_is_right_but_not_an_answer_handed_back_wrapped_or_pasted():
    import functools

    from widgets.exercises.gallery import fixed_loop
    from widgets.exercises.loop_bench import SETTINGS, judge, run_on_bench

    shown = inspect.getsource(fixed_loop)  # what the notebook shows
    pasted = {"torch": torch, "is_update_step": is_update_step}
    exec(compile(shown, "<pasted cell>", "exec"), pasted)

    def fixed_clipping_loop(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
        return fixed_loop(model, optimizer, loss_fn, batches, accumulation_steps, scheduler, max_grad_norm=1.0)

    clipping = functools.partial(fixed_loop, max_grad_norm=1.0)
    assert all(judge(run_on_bench(clipping, setting)) is None for setting in SETTINGS)
    assert_incorrect(GALLERY.my_loop.check(clipping), "package's own `fixed_loop`")
    assert_incorrect(GALLERY.my_loop.check(fixed_clipping_loop), "calls the package's `fixed_loop`")
    assert_incorrect(GALLERY.my_loop.check(functools.partial(pasted["fixed_loop"], max_grad_norm=1.0)),
                     "copied line for line")


def test_my_loop_other_answers():
    def my_loop(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
        ...
    assert GALLERY.my_loop.check(my_loop).status is Status.NOT_ATTEMPTED
    assert_incorrect(GALLERY.my_loop.check("my_loop"), "pass the function itself")
    no_scheduler = lambda model, optimizer, loss_fn, batches, accumulation_steps: make_loop()(  # noqa: E731
        model, optimizer, loss_fn, batches, accumulation_steps)
    assert_incorrect(GALLERY.my_loop.check(no_scheduler), "TypeError")
