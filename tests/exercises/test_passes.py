"""The pass watcher: every forward is seen however it is written, every backward pass is grouped by the
autograd engine's graph task, and a .grad written by hand shows as no pass at all."""
import pytest
import torch
import torch.nn.functional as F

from widgets.exercises.passes import PassWatch, check_structure, proportional
from widgets.exercises.toolkit import Wrong


def honest(m, d, t):
    for i in range(0, 8, 2):
        (F.mse_loss(m(d[i:i + 2]), t[i:i + 2]) / 4).backward()


def through_forward(m, d, t):
    F.mse_loss(m.forward(d), t).backward()


def through_f_linear(m, d, t):
    F.mse_loss(F.linear(d, m.weight, m.bias), t).backward()


def by_hand(m, d, t):
    F.mse_loss(d @ m.weight.T + m.bias, t).backward()


def summed(m, d, t):
    sum(F.mse_loss(m(d[i:i + 2]), t[i:i + 2]) / 4 for i in range(0, 8, 2)).backward()


def written(m, d, t):
    with torch.no_grad():
        r = d @ m.weight.T + m.bias - t
        m.weight.grad, m.bias.grad = 2 * (r * d).mean(0, keepdim=True), 2 * r.mean(0)


def autograd_grad(m, d, t):
    for i in range(0, 8, 2):
        grads = torch.autograd.grad(F.mse_loss(m(d[i:i + 2]), t[i:i + 2]) / 4, list(m.parameters()))
        for p, g in zip(m.parameters(), grads):
            p.grad = g if p.grad is None else p.grad + g


def torch_func(m, d, t):
    params = {k: v.detach() for k, v in m.named_parameters()}
    for i in range(0, 8, 2):
        x, y = d[i:i + 2], t[i:i + 2]
        g = torch.func.grad(lambda p, x=x, y=y: F.mse_loss(torch.func.functional_call(m, p, (x,)), y) / 4)(params)
        for k, p in m.named_parameters():
            p.grad = g[k] if p.grad is None else p.grad + g[k]


@pytest.mark.parametrize("answer, forwards, passes", [
    (honest, [2, 2, 2, 2], [[2], [2], [2], [2]]),
    (through_forward, [8], [[8]]),
    (through_f_linear, [8], [[8]]),
    (by_hand, [8], [[8]]),
    (summed, [2, 2, 2, 2], [[2, 2, 2, 2]]),
    (written, [], []),
    (autograd_grad, [2, 2, 2, 2], [[2], [2], [2], [2]]),
    (torch_func, [2, 2, 2, 2], [[2], [2], [2], [2]]),
])
def test_forwards_and_passes_are_seen_however_they_are_written(answer, forwards, passes):
    model, data, target = torch.nn.Linear(3, 1), torch.randn(8, 3), torch.randn(8, 1)
    with PassWatch(model) as watch:
        answer(model, data, target)
    assert watch.record.forwards == forwards
    assert watch.record.parameter_passes == passes


def test_check_structure_names_the_memory_and_the_written_grad():
    model, data, target = torch.nn.Linear(3, 1), torch.randn(8, 3), torch.randn(8, 1)
    for answer, words in [(honest, None), (summed, "4 micro-batches at once"), (by_hand, "8 examples at once"),
                          (written, "written by hand")]:
        model.zero_grad(set_to_none=True)
        with PassWatch(model) as watch:
            answer(model, data, target)
        if words is None:
            check_structure(watch, [2] * 4, "examples")
        else:
            with pytest.raises(Wrong, match=words):
                check_structure(watch, [2] * 4, "examples")


def test_a_function_that_never_ends_is_stopped_at_its_next_torch_call():
    model = torch.nn.Linear(3, 1)
    with pytest.raises(TimeoutError, match="time limit of 0.1 s"):
        with PassWatch(model, time_limit_s=0.1):
            while True:
                model(torch.ones(1, 3))


def test_the_watch_leaves_no_hook_behind():
    model = torch.nn.Linear(3, 1)
    with PassWatch(model):
        pass
    assert not model.weight._backward_hooks and not model.bias._backward_hooks


def test_proportional_finds_the_factor_or_none():
    b = torch.tensor([1.0, -2.0, 3.0], dtype=torch.float64)
    assert proportional(2.5 * b, b) == pytest.approx(2.5)
    assert proportional(b + torch.tensor([0.0, 0.0, 0.1], dtype=torch.float64), b) is None
