"""The auditor's token problem and its right loop, against plain autograd on the whole window."""
import pytest
import torch

from widgets.audit.instruments import run_loop
from widgets.audit.problems import MAX_LENGTH, AuditSetup, make_problem, token_cross_entropy
from widgets.core.loops import train_loop
from widgets.core.accumulation import IGNORE_INDEX, real_tokens


def window_mean_gradient(weight, batches):
    """The gradient of the mean token loss over every real token of the window, as one big batch."""
    w = weight.detach().clone().requires_grad_(True)
    x = torch.cat([b[0] for b in batches])
    y = torch.cat([b[1] for b in batches])
    (grad,) = torch.autograd.grad(token_cross_entropy(torch.nn.functional.embedding(x, w), y), w)
    return grad.reshape(-1)


@pytest.mark.parametrize("K, num_batches", [(4, 10), (3, 7), (2, 2)])
def test_token_batches_are_padded_with_ignored_targets_and_counts_differ_in_each_window(K, num_batches):
    problem = make_problem(AuditSetup(K, num_batches, None, False, "tokens"))
    for j, (x, y) in enumerate(problem.batches):
        rows = 3 if j < num_batches - 1 else 1  # the last micro-batch short, as drop_last=False leaves it
        assert x.shape == y.shape == (rows, MAX_LENGTH) and x.dtype == y.dtype == torch.long
        real = y != IGNORE_INDEX
        assert real[:, 0].all() and (real.int().diff(dim=1) <= 0).all()  # real tokens first, then padding
        assert (x[~real] == 0).all()
    for g in problem.windows:
        if len(g) > 1:
            assert len({problem.items(j) for j in g}) > 1


@pytest.mark.parametrize("K, num_batches", [(4, 10), (3, 7), (1, 3)])
def test_the_window_normalised_loop_steps_with_the_window_mean_gradient(K, num_batches):
    problem = make_problem(AuditSetup(K, num_batches, None, False, "tokens"))
    run = run_loop(lambda *args: train_loop(*args, items=real_tokens), problem)
    assert run.error is None and len(run.tape.steps) == len(problem.windows)
    for step, g in zip(run.tape.steps, problem.windows):
        weight = run.tape.forwards[g.start].weight  # the weight the window ran with
        big = window_mean_gradient(weight, [problem.batches[j] for j in g])
        assert torch.allclose(step.grad, big, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("K", [4, 3, 2])
def test_averaging_per_micro_batch_token_means_is_not_the_window_mean(K):
    problem = make_problem(AuditSetup(K, 2 * K, None, False, "tokens"))
    weight = torch.zeros(5, 5, dtype=torch.float64)
    window = problem.batches[:K]
    w = weight.clone().requires_grad_(True)
    averaged = sum(token_cross_entropy(torch.nn.functional.embedding(x, w), y) for x, y in window) / K
    (grad,) = torch.autograd.grad(averaged, w)
    assert not torch.allclose(grad.reshape(-1), window_mean_gradient(weight, window), rtol=1e-5, atol=1e-8)


def test_item_sum_gradient_is_the_softmax_minus_one_hot_at_the_real_tokens():
    problem = make_problem(AuditSetup(2, 2, None, False, "tokens"))
    x, y = problem.batches[0]
    logits = torch.randn(*x.shape, 5, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    one_hot = torch.nn.functional.one_hot(y.clamp(min=0), 5).to(logits.dtype)
    expected = (logits.softmax(-1) - one_hot) * (y != IGNORE_INDEX).unsqueeze(-1)  # d/d logits of the token sum
    assert torch.allclose(problem.item_sum_gradient(logits, y), expected)


@pytest.mark.parametrize("task", ["regression", "tokens", "rl"])
def test_on_one_rank_the_right_factor_is_one_over_the_window_items(task):
    problem = make_problem(AuditSetup(3, 7, None, False, task))
    for u, g in enumerate(problem.windows):
        assert problem.right_factor(u) == 1 / sum(problem.items(j) for j in g)
        assert problem.readings(g.start)[None] == pytest.approx([problem.right_factor(u)])


@pytest.mark.parametrize("factor, text", [(1.0, "1"), (1 - 3e-8, "1"), (1 + 3e-8, "1"), (0.25 - 1e-9, "1/4"),
                                          (0.25 + 1e-9, "1/4"), (4 + 1e-7, "4"), (1.25, "1.25"), (0.3, "0.3")])
def test_a_factor_a_hair_off_a_simple_value_prints_the_same_on_every_cpu(factor, text):
    """Which side of 1 a float32 factor lands on depends on the CPU's summation order (an AVX512
    machine printed '1' where this one printed '1/1'): the printed text must not."""
    from widgets.audit.problems import _fraction

    assert _fraction(factor) == text
