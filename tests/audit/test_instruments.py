"""The auditor's instruments record what a loop did: checked against the reference loop and big-batch oracles."""
import pytest
import torch

from widgets.audit.instruments import LEARNING_RATE, AuditScheduler, AuditSGD, run_loop, watched_model
from widgets.audit.problems import AuditSetup, Regression, make_problem
from widgets.core.loops import train_loop


@pytest.mark.parametrize("K, num_batches", [(1, 3), (4, 10), (3, 9)])
def test_problem_groups_cover_every_batch_with_an_uneven_tail(K, num_batches):
    problem = make_problem(AuditSetup(K, num_batches, None, False))
    assert len(problem.batches) == num_batches and problem.b == K + 1
    assert all(x.shape == (K + 1, 3) and y.shape == (K + 1, 1) for x, y in problem.batches[:-1])
    last = max(1, (K + 1) // 2)  # the last micro-batch holds fewer examples, as drop_last=False leaves it
    assert problem.batches[-1][0].shape == (last, 3) and problem.batches[-1][1].shape == (last, 1)
    assert [i for g in problem.windows for i in g] == list(range(num_batches))
    assert [len(g) for g in problem.windows[:-1]] == [K] * (len(problem.windows) - 1)
    assert len(problem.windows[-1]) == (num_batches % K or K)


def true_gradient(weight, batch):
    """One micro-batch's flat gradient and mean loss at `weight`, by plain autograd."""
    w = weight.detach().clone().requires_grad_(True)
    loss = Regression.loss_fn(torch.nn.functional.linear(batch[0], w), batch[1])
    (grad,) = torch.autograd.grad(loss, w)
    return grad.reshape(-1), loss.item()

def test_problem_is_deterministic_and_leaves_the_global_random_state_alone():
    torch.manual_seed(7)
    expected = torch.rand(1)
    torch.manual_seed(7)
    a, b = make_problem(AuditSetup(4, 10, None, False)), make_problem(AuditSetup(4, 10, None, False))
    assert all(torch.equal(xa, xb) and torch.equal(ya, yb) for (xa, ya), (xb, yb) in zip(a.batches, b.batches))
    assert torch.equal(torch.rand(1), expected)


def test_with_clip_norm_every_first_micro_step_pile_exceeds_it():
    problem = make_problem(AuditSetup(4, 10, 1.0, False))
    zero = torch.zeros(1, 3, dtype=torch.float64)
    assert min(float(true_gradient(zero, batch)[0].norm()) / 4 for batch in problem.batches) > 1.0


def test_true_gradient_is_autograd_of_the_mean_squared_error():
    x, y = make_problem(AuditSetup(2, 2, None, False)).batches[0]
    weight = torch.tensor([[0.5, -1.0, 2.0]], dtype=torch.float64)
    grad, loss = true_gradient(weight, (x, y))
    residual = x @ weight.T - y
    assert torch.allclose(grad, (2 / len(x)) * (x.T @ residual).reshape(-1))  # d/dw mean(r^2)
    assert loss == pytest.approx(float((residual**2).mean()))


@pytest.mark.parametrize("K, num_batches", [(4, 10), (3, 9)])
def test_reference_loop_steps_with_the_big_batch_gradient_of_each_group(K, num_batches):
    problem = make_problem(AuditSetup(K, num_batches, None, True))
    run = run_loop(train_loop, problem)
    tape = run.tape
    assert run.error is None and len(tape.passes) == num_batches
    assert [tape.forwards[p.forwards[0]].batch for p in tape.passes] == list(range(num_batches))
    assert [s.passes_before for s in tape.steps] == [g.stop for g in problem.windows]
    assert tape.zero_grads == len(problem.windows)
    assert tape.scheduler_calls == list(range(1, len(problem.windows) + 1))  # the constructor's step not counted
    weight_at = [tape.forwards[p.forwards[0]].weight for p in tape.passes]  # the weight each batch ran with
    for step, g in zip(tape.steps, problem.windows):
        x = torch.cat([problem.batches[j][0] for j in g])  # the group's examples as one big batch
        y = torch.cat([problem.batches[j][1] for j in g])
        big, _ = true_gradient(weight_at[g.start], (x, y))
        assert torch.allclose(step.grad, big, rtol=1e-10, atol=1e-12)
    last = tape.passes[-1]
    assert torch.allclose(last.after, last.before + last.incoming)  # the pile grows by what arrives
    examples = [sum(len(problem.batches[j][1]) for j in g) for g in problem.windows]
    assert run.log == pytest.approx([sum(true_gradient(weight_at[j], problem.batches[j])[1]
                                              * len(problem.batches[j][1]) for j in g) / n
                                          for g, n in zip(problem.windows, examples)])  # the mean over examples


def test_sgd_records_the_learning_rate_and_the_scheduler_warms_it_up():
    model = watched_model(make_problem(AuditSetup(2, 2, None, False)))
    optimizer = AuditSGD(model)
    scheduler = AuditScheduler(optimizer, warmup_updates=4)
    assert not model.weight.detach().any()  # starts at zero
    for _ in range(2):
        model(torch.ones(1, 3, dtype=torch.float64)).sum().backward()
        optimizer.step()
        scheduler.step()
        model.zero_grad()
    rates = [step.lr for step in model.tape.steps]
    assert rates[1] > rates[0] > 0 and max(rates) <= LEARNING_RATE
    assert model.tape.scheduler_calls == [1, 2] and model.tape.zero_grads == 2


def test_run_loop_turns_an_exception_into_text_naming_the_line():
    def broken(model, optimizer, loss_fn, batches, accumulation_steps):
        raise ValueError("nope")

    run = run_loop(broken, make_problem(AuditSetup(2, 3, None, False)))
    assert run.error.startswith("ValueError: nope, at line") and 'raise ValueError("nope")' in run.error


def test_each_backward_pass_records_the_outputs_it_went_through():
    problem = make_problem(AuditSetup(2, 3, None, False))
    model = watched_model(problem)
    (x0, y0), (x1, y1) = problem.batches[:2]
    (model(x0) - y0).square().mean().backward()
    ((model(x1) - y1).square().sum() + (model(x0) - y0).square().sum()).backward()  # two forwards, one pass
    tape = model.tape
    assert [f.batch for f in tape.forwards] == [0, 1, 0]
    assert [p.forwards for p in tape.passes] == [(0,), (1, 2)]
    out = tape.forwards[1].output
    assert torch.allclose(tape.passes[1].output_grads[0], 2 * (out - y1))  # d/d out of the summed squares
    assert tape.passes[0].before is None and torch.allclose(tape.passes[1].before, tape.passes[0].after)


def test_inputs_that_are_no_micro_batch_are_recorded_as_none():
    problem = make_problem(AuditSetup(2, 3, None, False))
    model = watched_model(problem)
    model(torch.cat([problem.batches[0][0], problem.batches[1][0]]))
    assert model.tape.forwards[0].batch is None
    assert model.tape.forwards[0].window == (0, 1)  # a window of two micro-batches run in one pass
    model(problem.batches[0][0] + 1)
    assert model.tape.forwards[1].batch is None and model.tape.forwards[1].window == ()


@pytest.mark.parametrize("way", ["forward", "linear", "matmul"])
def test_a_forward_that_bypasses_the_modules_hooks_is_recorded(way):
    problem = make_problem(AuditSetup(3, 4, None, False))
    run_forward = {"forward": lambda m, x: m.forward(x), "linear": lambda m, x: torch.nn.functional.linear(x, m.weight),
                   "matmul": lambda m, x: x @ m.weight.T}[way]

    def loop(model, optimizer, loss_fn, batches, accumulation_steps):
        for x, y in batches:
            loss_fn(run_forward(model, x), y).backward()

    tape = run_loop(loop, problem).tape
    assert [f.batch for f in tape.forwards] == [0, 1, 2, 3]  # one forward each, seen once
    assert [p.forwards for p in tape.passes] == [(0,), (1,), (2,), (3,)]


def test_building_the_model_leaves_the_global_random_state_alone():
    torch.manual_seed(3)
    expected = torch.rand(1)
    torch.manual_seed(3)
    for task in ("regression", "tokens"):
        model = watched_model(make_problem(AuditSetup(2, 3, None, False, task)))
        assert not model.weight.detach().any()  # starts at zero
    assert torch.equal(torch.rand(1), expected)
