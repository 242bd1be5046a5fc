"""The researcher 7 checkers: right answers pass, typical wrong ones fail with their reason, and an
answer that hard-codes the notebook's example fails."""
import pytest
import torch

from tests.exercises.exercise_support import assert_incorrect
from widgets.lessons.researcher_7 import stages_exercises as from_registry
from widgets.lessons.researcher_7.exercises import bubble_fraction, bytes_per_rank, stages_exercises
from widgets.lessons.researcher_7.pipeline import bubble_formula, simulate
from widgets.exercises.toolkit import Status
from widgets.research.planner import zero_bytes_per_rank

EX = stages_exercises()


def test_registered():
    assert len(from_registry()) == 3


def test_bubble_right():
    def mine(stages, micro_batches):
        return (stages - 1) / (micro_batches + stages - 1)
    assert EX.bubble.check(mine).correct
    assert EX.bubble.check(lambda p, m: 1 - m / (m + p - 1)).correct


@pytest.mark.parametrize("answer, words", [
    (lambda p, m: (p - 1) / m, ["busy time"]),
    (lambda p, m: (p - 1) / p, ["single micro-batch"]),
    (lambda p, m: (p - 1) / (m + p), ["not m + p"]),
    (lambda p, m: m / (m + p - 1), ["busy share"]),
    (lambda p, m: 3 / 11, ["whatever p and m"]),  # the notebook's p = 4, m = 8, hard-coded
    (lambda p, m: 0.5 * p / m, ["gave"]),
])
def test_bubble_wrong(answer, words):
    assert_incorrect(EX.bubble.check(answer), *words)


def test_bubble_not_a_function_or_not_filled_in():
    assert_incorrect(EX.bubble.check(0.27), "pass the function itself")
    assert EX.bubble.check(lambda p, m: ...).status is Status.NOT_ATTEMPTED
    assert EX.bubble.check(bubble_fraction).correct


def test_bubble_read_off_the_package_simulator_passes():
    def counted_on_the_grid(stages, micro_batches):
        return simulate("gpipe", stages, micro_batches).bubble_fraction
    assert EX.bubble.check(counted_on_the_grid).correct
    assert EX.bubble.check(lambda p, m: bubble_formula(p, m)).correct


def test_zero_right():
    def mine(parameters, stage, world_size):
        shard = -(-parameters // world_size)
        return 2 * (shard if stage == 3 else parameters) + 2 * (shard if stage >= 2 else parameters) + \
            12 * (shard if stage >= 1 else parameters)
    assert EX.zero_bytes.check(mine).correct


def _zero(weights_from, grads_from, optimizer_from, grad_bytes=2, optimizer_bytes=12):
    def answer(parameters, stage, world_size):
        shard = -(-parameters // world_size)
        return (2 * (shard if stage >= weights_from else parameters)
                + grad_bytes * (shard if stage >= grads_from else parameters)
                + optimizer_bytes * (shard if stage >= optimizer_from else parameters))
    return answer


@pytest.mark.parametrize("answer, words", [
    (_zero(3, 3, 1), ["Stage 2 shards the gradients too"]),
    (_zero(3, 1, 1), ["Stage 1 shards only the optimizer state"]),
    (_zero(4, 2, 1), ["Stage 3 also shards the 16-bit weights"]),
    (_zero(3, 2, 1, grad_bytes=4), ["not 4"]),
    (_zero(3, 2, 1, optimizer_bytes=8), ["12 bytes per parameter"]),
    (_zero(3, 2, 1, optimizer_bytes=0), ["optimizer state is missing"]),
    (lambda p, s, n: 16 * 7_000_000_000 / 8, ["whatever the model"]),  # one example's stage 3, hard-coded
    (lambda p, s, n: 16 * p / n, ["should be"]),
])
def test_zero_wrong(answer, words):
    assert_incorrect(EX.zero_bytes.check(answer), *words)


def test_zero_not_filled_in():
    assert EX.zero_bytes.check(lambda p, s, n: None).status is Status.NOT_ATTEMPTED
    assert EX.zero_bytes.check(bytes_per_rank).correct
    assert EX.zero_bytes.check(lambda p, s, n: zero_bytes_per_rank(p, s, n)["total"]).correct


def test_worked_answers_agree_with_the_references():
    for p, s, n in [(7_000_000_000, s, 8) for s in range(4)] + [(10, 3, 3)]:
        assert bytes_per_rank(p, s, n) == zero_bytes_per_rank(p, s, n)["total"]
    assert bubble_fraction(4, 8) == pytest.approx(3 / 11)


def test_window_right_and_each_reported_mistake_named():
    from widgets.lessons.researcher_7.window import WINDOW_MISTAKES, window_gradient
    assert EX.window.check(window_gradient).correct
    words = {"scale at every step": "torchtitan #1733", "scale per stage": "DeepSpeed #8152",
             "gradients wiped": "Automodel PR #3530"}
    for name, (loop, _) in WINDOW_MISTAKES.items():
        assert_incorrect(EX.window.check(loop), words[name])


def _window(weight=None, cut=True, wipe=False):
    """A window loop written independently: `weight(len(x), n, K, m)` scales each micro-batch's loss."""
    def answer(stage0, stage1, window):
        n = sum(len(x) for step in window for x, _ in step)
        for step in window:
            if wipe:
                for p in [*stage0.parameters(), *stage1.parameters()]:
                    p.grad = None
            for x, y in step:
                h = stage0(x)
                received = h.detach().requires_grad_()
                loss = torch.nn.functional.mse_loss(stage1(received), y)
                (loss * weight(len(x), n, len(window), len(step))).backward()
                if cut:
                    h.backward(received.grad)
    return answer


@pytest.mark.parametrize("answer, words", [
    (_window(lambda b, n, K, m: 1.0), ["undivided", "#7773"]),
    (_window(lambda b, n, K, m: 1 / (K * m)), ["equal micro-batches"]),
    (_window(lambda b, n, K, m: b / n, cut=False), ["h.backward(h_received.grad)"]),
    (_window(lambda b, n, K, m: b / n, wipe=True), ["Automodel PR #3530"]),
    (_window(lambda b, n, K, m: 2 * b / n), ["times the unsplit model's"]),
    (lambda s0, s1, w: 0.0, ["no gradient reached .grad"]),
])
def test_window_wrong(answer, words):
    assert_incorrect(EX.window.check(answer), *words)


def test_window_right_written_independently_and_not_filled_in():
    assert EX.window.check(_window(lambda b, n, K, m: b / n)).correct
    assert EX.window.check(lambda s0, s1, w: ...).status is Status.NOT_ATTEMPTED
