"""Researcher notebook 2's checkers: right answers pass, each typical wrong answer fails with its message."""
import pytest
import torch

from tests.exercises.exercise_support import assert_incorrect
from widgets.lessons.researcher_2.exercises import breaks_exercises
from widgets.exercises.toolkit import Status
from widgets.lessons.researcher_2.contrastive import info_nce

EX = breaks_exercises()




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
    (cache_step(whole=True), ["carried 32 examples at once"]),
    (lambda e, a, b, K, t: e["a"](a[:2]), ["empty"]),
    (cache_step, None),
])
def test_cache_wrong(answer, words):
    feedback = EX.cache.check(answer)
    if words is None:  # the factory itself, not a step: it never calls the encoders
        assert feedback.status is not Status.CORRECT
    else:
        assert_incorrect(feedback, *words)


def full_graph_called_caching(encoders, a, b, K, t=0.1):
    parts = torch.arange(a.shape[0]).chunk(K)
    za = torch.cat([encoders["a"](a[p]) for p in parts])  # micro-batches on the way in, every graph kept
    zb = torch.cat([encoders["b"](b[p]) for p in parts])
    info_nce(za, zb, t).backward()


def tower_b_on_the_full_batch(encoders, a, b, K, t=0.1):
    parts = torch.arange(a.shape[0]).chunk(K)
    with torch.no_grad():
        za = torch.cat([encoders["a"](a[p]) for p in parts]).requires_grad_()
    zb = encoders["b"](b)  # tower b: all 32 at once, graph and all
    info_nce(za, zb, t).backward()
    for p in parts:
        encoders["a"](a[p]).backward(za.grad[p])


def cache_with_autograd_grad(encoders, a, b, K, t=0.1):
    parts = torch.arange(a.shape[0]).chunk(K)
    with torch.no_grad():
        za = torch.cat([encoders["a"](a[p]) for p in parts])
        zb = torch.cat([encoders["b"](b[p]) for p in parts])
    za.requires_grad_(), zb.requires_grad_()
    ga, gb = torch.autograd.grad(info_nce(za, zb, t), [za, zb])
    params = list(encoders.parameters())
    for p in parts:  # each micro-batch's share, piled by hand
        grads = torch.autograd.grad([encoders["a"](a[p]), encoders["b"](b[p])], params, [ga[p], gb[p]])
        for q, g in zip(params, grads):
            q.grad = g if q.grad is None else q.grad + g


@pytest.mark.parametrize("answer, words", [
    (full_graph_called_caching, ["went through 4 micro-batches at once"]),
    (tower_b_on_the_full_batch, ["carried 32 examples at once"]),
])
def test_cache_sees_every_tower_and_the_memory_kept(answer, words):
    assert_incorrect(EX.cache.check(answer), *words)


def test_cache_accepts_an_autograd_grad_pile():

    feedback = EX.cache.check(cache_with_autograd_grad)
    assert feedback.correct, feedback


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


def test_cache_calling_the_packages_gradient_cache_passes():
    from widgets.lessons.researcher_2.contrastive import gradient_cache

    def step(encoders, a, b, K, t=0.1):
        gradient_cache(encoders, a, b, [slice(i, i + 8) for i in range(0, 32, 8)], t)
    assert EX.cache.check(step).correct
