"""The auditor's instruments record what a loop did: checked against the reference loop and big-batch oracles."""
import pytest
import torch

from widgets.audit.instruments import (
    LEARNING_RATE,
    AuditModel,
    AuditScheduler,
    AuditSGD,
    make_problem,
    reference_loop,
    run_loop,
    true_gradient,
)


@pytest.mark.parametrize("K, num_batches", [(1, 3), (4, 10), (3, 9)])
def test_problem_groups_cover_every_batch_with_an_uneven_tail(K, num_batches):
    problem = make_problem(K, num_batches, None, False)
    assert len(problem.batches) == num_batches and problem.b == K + 1
    assert all(x.shape == (K + 1, 3) and y.shape == (K + 1, 1) for x, y in problem.batches)
    assert [i for g in problem.groups for i in g] == list(range(num_batches))
    assert [len(g) for g in problem.groups[:-1]] == [K] * (len(problem.groups) - 1)
    assert len(problem.groups[-1]) == (num_batches % K or K)


def test_problem_is_deterministic_and_leaves_the_global_random_state_alone():
    torch.manual_seed(7)
    expected = torch.rand(1)
    torch.manual_seed(7)
    a, b = make_problem(4, 10, None, False), make_problem(4, 10, None, False)
    assert all(torch.equal(xa, xb) and torch.equal(ya, yb) for (xa, ya), (xb, yb) in zip(a.batches, b.batches))
    assert torch.equal(torch.rand(1), expected)


def test_with_clip_norm_every_first_micro_step_pile_exceeds_it():
    problem = make_problem(4, 10, 1.0, False)
    zero = torch.zeros(1, 3, dtype=torch.float64)
    assert min(float(true_gradient(zero, batch)[0].norm()) / 4 for batch in problem.batches) > 1.0


def test_true_gradient_is_autograd_of_the_mean_squared_error():
    x, y = make_problem(2, 2, None, False).batches[0]
    weight = torch.tensor([[0.5, -1.0, 2.0]], dtype=torch.float64)
    grad, loss = true_gradient(weight, (x, y))
    residual = x @ weight.T - y
    assert torch.allclose(grad, (2 / len(x)) * (x.T @ residual).reshape(-1))  # d/dw mean(r^2)
    assert loss == pytest.approx(float((residual**2).mean()))


@pytest.mark.parametrize("K, num_batches", [(4, 10), (3, 9)])
def test_reference_loop_steps_with_the_big_batch_gradient_of_each_group(K, num_batches):
    problem = make_problem(K, num_batches, None, True)
    run = run_loop(reference_loop, problem)
    tape = run.tape
    assert run.error is None and len(tape.incoming) == num_batches
    assert [s[0] for s in tape.steps] == [g.stop for g in problem.groups]
    assert tape.zero_grads == len(problem.groups)
    assert tape.scheduler_calls == list(range(1, len(problem.groups) + 1))  # the constructor's step not counted
    for (at, used, _), g in zip(tape.steps, problem.groups):
        x = torch.cat([problem.batches[j][0] for j in g])  # the group's examples as one big batch
        y = torch.cat([problem.batches[j][1] for j in g])
        big, _ = true_gradient(tape.weights[g.start], (x, y))
        assert torch.allclose(used, big, rtol=1e-10, atol=1e-12)
    assert torch.allclose(tape.after[-1], tape.before[-1] + tape.incoming[-1])  # the pile grows by what arrives
    assert run.returned == pytest.approx([sum(true_gradient(tape.weights[j], problem.batches[j])[1] for j in g)
                                          / len(g) for g in problem.groups])


def test_sgd_records_the_learning_rate_and_the_scheduler_warms_it_up():
    model = AuditModel()
    optimizer = AuditSGD(model)
    scheduler = AuditScheduler(optimizer, warmup_updates=4)
    assert not model.weight.detach().any()  # starts at zero
    for _ in range(2):
        model(torch.ones(1, 3, dtype=torch.float64)).sum().backward()
        optimizer.step()
        scheduler.step()
        model.zero_grad()
    rates = [lr for _, _, lr in model.tape.steps]
    assert rates[1] > rates[0] > 0 and max(rates) <= LEARNING_RATE
    assert model.tape.scheduler_calls == [1, 2] and model.tape.zero_grads == 2


def test_run_loop_turns_an_exception_into_text_naming_the_line():
    def broken(model, optimizer, loss_fn, batches, accumulation_steps):
        raise ValueError("nope")

    run = run_loop(broken, make_problem(2, 3, None, False))
    assert run.error.startswith("ValueError: nope, at line") and 'raise ValueError("nope")' in run.error
