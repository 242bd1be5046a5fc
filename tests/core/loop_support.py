"""What the tests of the lab's two loops share (tests/core/test_loops.py: `widgets.core.loops`, the loops a
learner reads; tests/core/test_train_loop.py: `train_loop`, the general loop): one regression problem, its
micro-batches, and the gradient each optimizer.step() used."""
from __future__ import annotations

import torch

from widgets.core.accumulation import make_regression_data

mse = torch.nn.functional.mse_loss
X, Y = make_regression_data(200, seed=4)


def micro_batches(n: int, b: int) -> list:
    """The first n examples in micro-batches of b (the last one shorter when b does not divide n)."""
    return [(X[i : min(i + b, n)], Y[i : min(i + b, n)]) for i in range(0, n, b)]


def applied(optimizer) -> list[torch.Tensor]:
    """The flat gradient each optimizer.step() uses, recorded by a pre-hook."""
    used = []
    optimizer.register_step_pre_hook(lambda opt, args, kwargs: used.append(
        torch.cat([p.grad.reshape(-1).clone() for g in opt.param_groups for p in g["params"]])))
    return used
