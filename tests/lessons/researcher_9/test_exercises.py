"""Researcher notebook 9's checkers: right answers pass; typical wrong ones, and answers that hard-code the
notebook's example, fail with their reason."""
import concurrent.futures
import math

import pytest

from tests.exercises.exercise_support import assert_incorrect
from widgets.lessons.researcher_9 import adam_exercises as lazily_loaded
from widgets.lessons.researcher_9.exercises import adam_exercises, new_beta, scale, updates_done
from widgets.exercises.toolkit import Status
from widgets.lessons.researcher_9.adam_k import AdamHyper, malladi_scaled, same_half_life, scale_adam

EX = adam_exercises()


def test_the_set_is_registered():
    assert lazily_loaded is adam_exercises and len(EX) == 4


# --- malladi ------------------------------------------------------------------------------------

def own_scale(lr, beta1, beta2, eps, k):
    root = k**0.5
    return [lr * root, 1 - (1 - beta1) * k, 1 - (1 - beta2) * k, eps / root]


@pytest.mark.parametrize("answer, words", [
    (lambda lr, b1, b2, e, k: (lr * k, 1 - k * (1 - b1), 1 - k * (1 - b2), e / math.sqrt(k)), ["SGD's"]),
    (lambda lr, b1, b2, e, k: (lr * math.sqrt(k), b1, b2, e), ["beta1 is unchanged"]),
    (lambda lr, b1, b2, e, k: (lr * math.sqrt(k), b1**k, b2**k, e / math.sqrt(k)), ["half-life rule"]),
    (lambda lr, b1, b2, e, k: (lr * math.sqrt(k), 1 - (1 - b1) / k, 1 - (1 - b2) / k, e / math.sqrt(k)), ["divided by k"]),
    (lambda lr, b1, b2, e, k: (lr * math.sqrt(k), 1 - k * (1 - b1), 1 - k * (1 - b2), e), ["eps is unchanged"]),
    (lambda lr, b1, b2, e, k: (lr * math.sqrt(k), 1 - k * (1 - b1), 1 - k * (1 - b2), e * math.sqrt(k)), ["grows"]),
    (lambda lr, b1, b2, e, k: (2e-3, 0.6, 0.996, 5e-9), ["for (lr, beta1, beta2, eps, k)"]),  # the example, hard-coded
    (lambda lr, b1, b2, e, k: (lr,), ["four numbers"]),
    (3.0, ["pass the function itself"]),
])
def test_malladi_wrong(answer, words):
    assert_incorrect(EX.malladi.check(answer), *words)


def test_malladi_right():
    assert EX.malladi.check(own_scale).correct
    assert scale(1e-3, 0.9, 0.999, 1e-8, 4) == pytest.approx(malladi_scaled(1e-3, 0.9, 0.999, 1e-8, 4))
    assert EX.malladi.check(malladi_scaled).correct
    assert EX.malladi.check(lambda *a: malladi_scaled(*a)).correct
    assert EX.malladi.check(...).status is Status.NOT_ATTEMPTED


def test_malladi_from_a_thread_pool_passes():
    def in_a_pool(lr, beta1, beta2, eps, k):  # the package's rule, run on a worker thread
        with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
            return pool.submit(malladi_scaled, lr, beta1, beta2, eps, k).result()

    def own_rule_in_a_pool(lr, beta1, beta2, eps, k):
        with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
            return pool.submit(own_scale, lr, beta1, beta2, eps, k).result()

    def package_rule_by_name(lr, beta1, beta2, eps, k):  # scale_adam calls malladi_scaled
        with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
            hyper = pool.submit(scale_adam, AdamHyper(lr, beta1, beta2, eps), k, "malladi").result()
        return hyper.lr, hyper.beta1, hyper.beta2, hyper.eps

    assert EX.malladi.check(in_a_pool).correct
    assert EX.malladi.check(package_rule_by_name).correct
    assert EX.malladi.check(own_rule_in_a_pool).correct


# --- half_life ----------------------------------------------------------------------------------

@pytest.mark.parametrize("answer, words", [
    (lambda beta, k: 1 - k * (1 - beta), ["first-order"]),
    (lambda beta, k: beta, ["unchanged"]),
    (lambda beta, k: beta ** (1 / k), ["forgets more slowly"]),
    (lambda beta, k: 0.996006, ["for beta ="]),  # the example, hard-coded
])
def test_half_life_wrong(answer, words):
    assert_incorrect(EX.half_life.check(answer), *words)


def test_half_life_right():
    assert EX.half_life.check(lambda beta, k: math.exp(k * math.log(beta))).correct
    assert new_beta(0.9, 2) == pytest.approx(same_half_life(0.9, 2))
    assert EX.half_life.check(same_half_life).correct


# --- tau ----------------------------------------------------------------------------------------

def test_tau():
    assert EX.tau.check((5.0, 0.2)).correct
    assert_incorrect(EX.tau.check((5.0, 0.1)), "tau doubles")
    assert_incorrect(EX.tau.check((5.0, 0.4)), "the lr grew by 2 too")
    assert_incorrect(EX.tau.check((5.0, 0.05)), "other way round")
    assert_incorrect(EX.tau.check((10_000, 0.2)), "tau in updates")
    assert_incorrect(EX.tau.check((0.2, 0.2)), "inverted")
    assert_incorrect(EX.tau.check(5.0), "two numbers")


# --- updates ------------------------------------------------------------------------------------

def own_updates(micro_steps, k_from):
    done, marks = 0, sorted(k_from)
    for i, start in enumerate(marks):
        stop = marks[i + 1] if i + 1 < len(marks) else micro_steps
        done += max(0, min(stop, micro_steps) - start) // k_from[start]
    return done


@pytest.mark.parametrize("answer, words", [
    (lambda m, k_from: m // k_from[max(s for s in k_from if s <= m)], ["the K in use now"]),
    (lambda m, k_from: m, ["counted micro-steps"]),
    (lambda m, k_from: 15, ["the windows completed number"]),  # the notebook's example, hard-coded
    (lambda m, k_from: math.ceil(sum((min(e, m) - s) / k_from[s] for s, e in zip(sorted(k_from), sorted(k_from)[1:] + [m]) if e > s)),
     ["you gave"]),  # counts the half-built window
])
def test_updates_wrong(answer, words):
    assert_incorrect(EX.updates.check(answer), *words)


def test_updates_right():
    assert EX.updates.check(own_updates).correct
    assert updates_done(80, {0: 4, 40: 8}) == 15
    assert EX.updates.check(updates_done).correct
    assert_incorrect(EX.updates.check("15"), "pass the function itself")
