"""Researcher notebook 1's checkers: right answers pass, each typical wrong answer fails with its message."""
import pytest
import torch

from tests.exercises.exercise_support import assert_incorrect
from widgets.lessons.researcher_1.exercises import exactness_exercises
from widgets.exercises.toolkit import Status

EX = exactness_exercises()


ce = torch.nn.functional.cross_entropy


@pytest.mark.parametrize("answer", [[0.5, 0.3, 0.2], (5 / 10, 3 / 10, 2 / 10), torch.tensor([0.5, 0.3, 0.2])])
def test_weights_correct(answer):
    assert EX.weights.check(answer).correct


@pytest.mark.parametrize("answer, words", [
    ([1 / 3] * 3, ["1/K each"]),
    ([1, 1, 1], ["about 3x"]),
    ([0.2, 0.3, 0.5], ["do not follow the sizes"]),
    ([0.5, 0.5, 0.5], ["add up to 1"]),
    ([0.5, 0.5], ["one weight per micro-batch"]),
])
def test_weights_wrong(answer, words):
    assert_incorrect(EX.weights.check(answer), *words)


def token_loop(divide="window"):
    def accumulate(model, micro_batches):
        window = sum(int((labels != -100).sum()) for _, labels in micro_batches)
        padded = sum(labels.numel() for _, labels in micro_batches)
        for inputs, labels in micro_batches:
            logits = model(inputs).reshape(-1, model.vocab_size)
            flat = labels.reshape(-1)
            if divide == "window":
                loss = ce(logits, flat, ignore_index=-100, reduction="sum") / window
            elif divide == "per_micro_batch":
                loss = ce(logits, flat, ignore_index=-100) / len(micro_batches)
            elif divide == "none":
                loss = ce(logits, flat, ignore_index=-100, reduction="sum")
            elif divide == "padded":
                loss = ce(logits, flat, ignore_index=-100, reduction="sum") / padded
            loss.backward()
    return accumulate


def test_tokens_correct_and_random_state_untouched():
    torch.manual_seed(11)
    before = torch.random.get_rng_state()
    assert EX.tokens.check(token_loop("window")).correct
    assert torch.equal(before, torch.random.get_rng_state())


@pytest.mark.parametrize("answer, words", [
    (token_loop("per_micro_batch"), ["2024 bug"]),
    (token_loop("none"), ["never divided"]),
    (token_loop("padded"), ["padding included"]),
    (lambda model, mbs: [(ce(model(i).reshape(-1, 12), l.reshape(-1), reduction="sum") / 1000).backward()
                         for i, l in [(torch.cat([i for i, _ in mbs]), torch.cat([l for _, l in mbs]))]],
     ["big batch itself"]),
    (lambda model, mbs: model(mbs[0][0]), ["left .grad empty"]),
    ("accumulate_tokens", ["pass the function itself"]),
])
def test_tokens_wrong(answer, words):
    assert_incorrect(EX.tokens.check(answer), *words)


def test_tokens_empty_function_is_not_attempted():
    assert EX.tokens.check(lambda model, micro_batches: None).status is Status.NOT_ATTEMPTED


def test_precision_answers():
    assert EX.precision.check("bf16_params").correct
    assert_incorrect(EX.precision.check("bf16_autocast"), "float32")
    assert_incorrect(EX.precision.check("bf16_params_fp32_master"), "that is the fix")
    assert_incorrect(EX.precision.check("float32"), "wide format")
    assert_incorrect(EX.precision.check("fp8"), "not one of the modes")
    assert_incorrect(EX.precision.check(3), "string")


def test_every_exercise_has_hints_and_a_solution():
    assert len(EX) == 3
    for exercise in EX:
        assert exercise.hint().text and exercise.solution().code


# --- disguised big batches, the package's own answer, right answers written unusually --------

def whole_window_plus_dummy_call(model, micro_batches):
    inputs = torch.cat([i for i, _ in micro_batches])
    labels = torch.cat([l for _, l in micro_batches])
    logits = model(inputs).reshape(-1, model.vocab_size)
    ce(logits, labels.reshape(-1), ignore_index=-100).backward()  # the whole window in one pass
    for inputs, _ in micro_batches:
        model(inputs)  # calls of the right size that carry nothing


def summed_then_one_backward(model, micro_batches):
    window = sum(int((labels != -100).sum()) for _, labels in micro_batches)
    losses = [ce(model(i).reshape(-1, model.vocab_size), l.reshape(-1), ignore_index=-100, reduction="sum") / window
              for i, l in micro_batches]
    sum(losses).backward()


def with_autograd_grad(model, micro_batches):
    window = sum(int((labels != -100).sum()) for _, labels in micro_batches)
    params = list(model.parameters())
    for inputs, labels in micro_batches:
        loss = ce(model(inputs).reshape(-1, model.vocab_size), labels.reshape(-1), ignore_index=-100, reduction="sum")
        for p, g in zip(params, torch.autograd.grad(loss, params)):
            p.grad = g / window if p.grad is None else p.grad + g / window


@pytest.mark.parametrize("answer, words", [
    (whole_window_plus_dummy_call, ["16 sequences at once"]),
    (summed_then_one_backward, ["went through 4 micro-batches at once"]),
])
def test_tokens_sees_a_whole_window_disguised(answer, words):
    assert_incorrect(EX.tokens.check(answer), *words)


def test_tokens_the_packages_accumulation_passes():
    assert EX.tokens.check(accumulate_tokens_of_the_package()).correct


def accumulate_tokens_of_the_package():
    from widgets.lessons.researcher_1.exercises import accumulate_tokens
    return accumulate_tokens


def test_tokens_accepts_autograd_grad_piles():
    feedback = EX.tokens.check(with_autograd_grad)
    assert feedback.correct, feedback
