"""Researcher notebook 2's checkers: right answers pass, each typical wrong answer fails with its message."""
import pytest
import torch

from exercise_support import assert_incorrect
from widgets.exercises.researcher_2 import breaks_exercises
from widgets.exercises.toolkit import Status
from widgets.research.contrastive import info_nce

EX = breaks_exercises()


pytestmark = pytest.mark.usefixtures("single_thread")  # tiny models: one CPU thread


@pytest.mark.parametrize("answer, words", [(32, ["effective batch"]), (4, ["number of micro-batches"]),
                                           (1, ["LayerNorm"]), (16, ["which examples"])])
def test_ghost_size(answer, words):
    assert EX.ghost_size.check(8).correct
    assert_incorrect(EX.ghost_size.check(answer), *words)


def cache_step(scale=1.0, naive=False, whole=False):
    def step(encoders, a, b, K, t=0.1):
        parts = torch.arange(a.shape[0]).chunk(K)
        if naive:
            for p in parts:
                (info_nce(encoders["a"](a[p]), encoders["b"](b[p]), t) / K).backward()
            return
        if whole:
            info_nce(encoders["a"](a), encoders["b"](b), t).backward()
            return
        with torch.no_grad():
            za = torch.cat([encoders["a"](a[p]) for p in parts]).requires_grad_()
            zb = torch.cat([encoders["b"](b[p]) for p in parts]).requires_grad_()
        (scale * info_nce(za, zb, t)).backward()
        for p in parts:
            torch.autograd.backward([encoders["a"](a[p]), encoders["b"](b[p])], [za.grad[p], zb.grad[p]])
    return step


def test_cache_correct():
    assert EX.cache.check(cache_step()).correct


@pytest.mark.parametrize("answer, words", [
    (cache_step(naive=True), ["plain accumulation", "7 negatives"]),
    (cache_step(scale=0.25), ["0.25x"]),
    (cache_step(whole=True), ["saw 32 examples"]),
    (lambda e, a, b, K, t: e["a"](a[:2]), ["empty"]),
    (cache_step, None),
])
def test_cache_wrong(answer, words):
    feedback = EX.cache.check(answer)
    if words is None:  # the factory itself, not a step: it never calls the encoders
        assert feedback.status is not Status.CORRECT
    else:
        assert_incorrect(feedback, *words)


def test_cache_empty_function_is_not_attempted():
    assert EX.cache.check(lambda e, a, b, K, t: None).status is Status.NOT_ATTEMPTED


@pytest.mark.parametrize("answer, words", [
    ((1, 1), ["differ"]),
    ((0.25, 1), ["upside down"]),
    ((16, 1), ["linearly"]),
    ((4, 4), ["rescaled to exactly"]),
    ((4,), ["two numbers"]),
])
def test_clip(answer, words):
    assert EX.clip.check((4, 1)).correct
    assert EX.clip.check([4.0000001, 1.0]).correct
    assert_incorrect(EX.clip.check(answer), *words)
