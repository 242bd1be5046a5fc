"""MoE balance loss under accumulation: the micro-batch aux loss fails allclose against the full batch,
the window-counted one passes, the forgotten /K fails; training under each shows the expert loads."""
import pytest
import torch

from widgets.lessons.researcher_8.moe import (
    TinyMoE, aux_loss, aux_values, make_domain_tokens, step_gradient, train_router, window_aux_step,
)

SEEDS = (0, 1, 2)
KS = (1, 2, 4, 8)


def close(a, b):
    return torch.allclose(a, b, rtol=1e-9, atol=1e-12)


def oracle(model, data, coef=0.1):
    """Plain autograd, written here: MSE mean + coef * E * sum_e f_e P_e over the whole batch."""
    model.zero_grad(set_to_none=True)
    probs = torch.softmax(model.router(data.x), dim=-1)
    top = probs.argmax(dim=1)
    out = probs.gather(1, top[:, None]).squeeze(1) * model.experts(data.x).gather(1, top[:, None]).squeeze(1)
    f = torch.stack([(top == e).double().mean() for e in range(model.num_experts)])
    loss = ((out - data.y) ** 2).mean() + coef * model.num_experts * (f * probs.mean(0)).sum()
    loss.backward()
    grad = torch.cat([p.grad.reshape(-1) for p in model.parameters()]).clone()
    model.zero_grad(set_to_none=True)
    return float(loss.detach()), grad


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("K", KS)
def test_window_counted_aux_is_the_full_batch_gradient(seed, K):
    data, model = make_domain_tokens(seed=seed), TinyMoE(seed=seed)
    loss, truth = oracle(model, data)
    got_loss, grad = step_gradient(model, data, K, "global")
    assert close(grad, truth) and got_loss == pytest.approx(loss, rel=1e-12)
    assert close(step_gradient(model, data, K, "full")[1], truth)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("K", KS)
def test_micro_batch_aux_breaks_for_k_above_1(seed, K):
    data, model = make_domain_tokens(seed=seed), TinyMoE(seed=seed)
    _, truth = oracle(model, data)
    assert close(step_gradient(model, data, K, "micro_batch")[1], truth) == (K == 1)
    micro, whole = aux_values(model, data, K)
    assert (micro > whole) == (K > 1)  # domain-homogeneous micro-batches look less balanced than the window


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("K", [2, 4, 8])
def test_forgotten_division_multiplies_the_aux_gradient_by_k(seed, K):
    data, model = make_domain_tokens(seed=seed), TinyMoE(seed=seed)
    _, divided = step_gradient(model, data, K, "micro_batch")
    _, undivided = step_gradient(model, data, K, "micro_batch_not_divided")
    _, task_only = step_gradient(model, data, K, "none")
    assert not close(undivided, divided)
    assert close(undivided - task_only, K * (divided - task_only))


def test_window_aux_step_with_top_2():
    data, model = make_domain_tokens(seed=0), TinyMoE(top_k=2, seed=0)
    model.zero_grad(set_to_none=True)
    out, probs, chosen = model(data.x)
    (((out - data.y) ** 2).mean() + 0.1 * aux_loss(probs, chosen)).backward()
    truth = torch.cat([p.grad.reshape(-1) for p in model.parameters()]).clone()
    model.zero_grad(set_to_none=True)
    window_aux_step(model, data.micro_batches(4), 0.1)
    assert close(torch.cat([p.grad.reshape(-1) for p in model.parameters()]), truth)


@pytest.mark.parametrize("seed", SEEDS)
def test_global_aux_lets_experts_specialise_by_domain(seed):
    micro = train_router("micro_batch", seed=seed)
    glob = train_router("global", seed=seed)
    assert glob.specialisation > micro.specialisation + 0.15
    assert max(glob.expert_load + micro.expert_load) < 0.4  # both balanced overall


def test_bad_input():
    with pytest.raises(ValueError, match="aux_mode"):
        train_router("local")
    with pytest.raises(ValueError, match="top_k"):
        TinyMoE(top_k=5)
    with pytest.raises(ValueError, match="aux_mode"):
        step_gradient(TinyMoE(), make_domain_tokens(), 2, "per_token")


def test_the_router_z_loss_accumulates_like_a_token_mean():
    from widgets.core.accumulation import flat_grad
    from widgets.lessons.researcher_8.moe import router_z_loss_sum
    d, m = make_domain_tokens(seed=1), TinyMoE(seed=1)
    (router_z_loss_sum(m, d.x) / len(d.y)).backward()
    full = flat_grad(m)
    for K in (2, 4, 8):
        m.zero_grad(set_to_none=True)
        for x, _ in d.micro_batches(K):
            (router_z_loss_sum(m, x) / len(d.y)).backward()
        assert torch.allclose(flat_grad(m), full, rtol=1e-9, atol=1e-12)
    logits = m.router(d.x)
    assert torch.allclose(router_z_loss_sum(m, d.x), (torch.logsumexp(logits, -1) ** 2).sum())
