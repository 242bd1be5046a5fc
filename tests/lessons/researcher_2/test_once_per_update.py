"""Once per update: EMA and weight decay at every micro-step fail allclose against the correct run;
a small max_grad_norm makes a missing division pass allclose (hidden), which it fails without clipping.
The oracle is a big-batch run written here: one batch of K*b per update, every operation once."""
import pytest
import torch

from widgets.core.accumulation import make_model, make_regression_data
from widgets.lessons.researcher_2.once_per_update import run_once_per_update, same_run

SEEDS = (0, 1, 2)
KS = (2, 4, 8)


def big_batch_run(K, b=8, updates=5, lr=0.1, ema_decay=0.9, weight_decay=0.1, seed=0):
    x, y = make_regression_data(K * b * updates, seed=seed)
    model = make_model(seed=seed)
    ema = [p.detach().clone() for p in model.parameters()]
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    for u in range(updates):
        part = slice(u * K * b, (u + 1) * K * b)
        torch.nn.functional.mse_loss(model(x[part]), y[part]).backward()
        opt.step()
        opt.zero_grad()
        with torch.no_grad():
            for p in model.parameters():
                p.mul_(1 - lr * weight_decay)
            for e, p in zip(ema, model.parameters()):
                e.mul_(ema_decay).add_(p, alpha=1 - ema_decay)
    flat = lambda ts: torch.cat([t.detach().reshape(-1) for t in ts])  # noqa: E731
    return flat(model.parameters()), flat(ema)


def close(a, b):
    return torch.allclose(a, b, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("K", KS)
def test_correct_run_matches_the_big_batch_and_each_mistake_breaks_it(seed, K):
    weights, ema = big_batch_run(K, seed=seed)
    good = run_once_per_update(K, weight_decay=0.1, seed=seed)
    assert close(good.weights, weights) and close(good.ema, ema)
    ema_wrong = run_once_per_update(K, weight_decay=0.1, seed=seed, mistakes=("ema_every_micro_step",))
    assert close(ema_wrong.weights, weights) and not close(ema_wrong.ema, ema)
    decay_wrong = run_once_per_update(K, weight_decay=0.1, seed=seed, mistakes=("decay_every_micro_step",))
    assert not close(decay_wrong.weights, weights)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("K", KS)
def test_small_clip_hides_a_missing_division(seed, K):
    divided = run_once_per_update(K, max_grad_norm=0.05, seed=seed)
    undivided = run_once_per_update(K, max_grad_norm=0.05, seed=seed, mistakes=("loss_not_divided",))
    assert same_run(divided, undivided) == {"weights": True, "ema": True}
    assert all(n > 0.05 for n in divided.grad_norms)
    assert [u / d for u, d in zip(undivided.grad_norms, divided.grad_norms)] == pytest.approx([K] * 5, rel=1e-5)
    unclipped = run_once_per_update(K, seed=seed), run_once_per_update(K, seed=seed, mistakes=("loss_not_divided",))
    assert same_run(*unclipped)["weights"] is False


@pytest.mark.parametrize("kwargs, match", [
    (dict(accumulation_steps=0), "accumulation_steps"),
    (dict(weight_decay=-0.1), "weight_decay"),
    (dict(max_grad_norm=0.0), "max_grad_norm"),
    (dict(mistakes=("step_twice",)), "mistakes"),
])
def test_bad_input_names_the_parameter(kwargs, match):
    with pytest.raises(ValueError, match=match):
        run_once_per_update(**kwargs)


def test_same_run_refuses_other_types():
    with pytest.raises(TypeError, match="a must be"):
        same_run(None, run_once_per_update())


def test_notebook_sizes_pass_the_ceiling(before_allocating):
    run = run_once_per_update(weight_decay=0.1, max_grad_norm=0.05)  # researcher_2's sizes: the defaults
    assert len(run.grad_norms) == 5
