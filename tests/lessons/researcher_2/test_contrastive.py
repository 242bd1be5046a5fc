"""In-batch negatives: plain accumulation fails allclose against the full batch; gradient caching passes,
with fewer saved bytes and two forward passes per example. The oracle InfoNCE is written here independently."""
import math

import pytest
import torch

from widgets.lessons.researcher_2.contrastive import (
    full_batch_contrastive,
    gradient_cache_contrastive,
    info_nce,
    make_encoders,
    make_pairs,
    naive_accumulated_contrastive,
)

SEEDS = (0, 1, 2)
KS = (2, 4, 8)


def oracle(encoders, a, b, t=0.1):
    """Symmetric InfoNCE by hand: log-softmax of cosine similarities over the whole batch."""
    encoders.zero_grad(set_to_none=True)
    za, zb = encoders["a"](a), encoders["b"](b)
    za, zb = za / za.norm(dim=1, keepdim=True), zb / zb.norm(dim=1, keepdim=True)
    s = za @ zb.T / t
    loss = -(s.diag() - s.logsumexp(dim=1)).mean() / 2 - (s.diag() - s.logsumexp(dim=0)).mean() / 2
    loss.backward()
    grad = torch.cat([p.grad.reshape(-1) for p in encoders.parameters()]).detach().clone()
    encoders.zero_grad(set_to_none=True)
    return float(loss.detach()), grad


def close(a, b):
    return torch.allclose(a, b, rtol=1e-7, atol=1e-10)


@pytest.fixture(scope="module", params=SEEDS)
def problem(request):
    seed = request.param
    a, b = make_pairs(32, seed=seed)
    encoders = make_encoders(hidden=64, seed=seed)
    return encoders, a, b, oracle(encoders, a, b)


def test_full_batch_is_the_oracle(problem):
    encoders, a, b, (loss, grad) = problem
    run = full_batch_contrastive(encoders, a, b)
    assert close(run.grad, grad) and math.isclose(run.loss, loss, rel_tol=1e-12)
    assert run.forward_examples == 32


@pytest.mark.parametrize("K", KS)
def test_plain_accumulation_changes_the_loss_and_breaks(problem, K):
    encoders, a, b, (loss, grad) = problem
    run = naive_accumulated_contrastive(encoders, a, b, K)
    assert not close(run.grad, grad)
    assert run.loss < loss  # fewer negatives: an easier task


@pytest.mark.parametrize("K", KS)
def test_gradient_cache_restores_the_full_batch(problem, K):
    encoders, a, b, (loss, grad) = problem
    run = gradient_cache_contrastive(encoders, a, b, K)
    assert close(run.grad, grad)
    assert math.isclose(run.loss, loss, rel_tol=1e-12)
    assert run.forward_examples == 2 * 32  # every example through each encoder twice


def test_gradient_cache_saves_memory_that_shrinks_with_k():
    a, b = make_pairs(64, seed=0)
    encoders = make_encoders(hidden=512, seed=0)
    full = full_batch_contrastive(encoders, a, b).peak_saved_bytes
    cached = [gradient_cache_contrastive(encoders, a, b, k).peak_saved_bytes for k in KS]
    assert full > cached[0] > cached[1] > cached[2] > 0


def test_the_meter_is_researcher_4s_distinct_storages_without_weights():
    """Oracle by hand: each tower keeps its tanh output (n x hidden, saved by tanh and by the second
    Linear: one storage, counted once) and its input's storage; no weight is counted."""
    n, hidden = 64, 512
    a, b = make_pairs(n, seed=0)
    encoders = make_encoders(hidden=hidden, seed=0)
    full = full_batch_contrastive(encoders, a, b)
    assert full.encoder_graph_bytes == 2 * n * hidden * 8 + a.nbytes + b.nbytes
    assert full.peak_saved_bytes == full.encoder_graph_bytes + full.loss_graph_bytes  # one graph holds both
    for k in (2, 4, 8, 16):
        cache = gradient_cache_contrastive(encoders, a, b, k)
        # one micro-batch's tanh outputs; a slice is a view, so the whole input storage is what is held
        assert cache.encoder_graph_bytes == 2 * (n // k) * hidden * 8 + a.nbytes + b.nbytes
        assert cache.loss_graph_bytes == full.loss_graph_bytes  # the InfoNCE on all n embeddings, every K
        assert cache.peak_saved_bytes == max(cache.encoder_graph_bytes, cache.loss_graph_bytes)  # freed in turn


def test_the_loss_graph_is_the_peak_once_a_micro_batch_is_small():
    a, b = make_pairs(64, seed=0)
    encoders = make_encoders(hidden=512, seed=0)
    runs = {k: gradient_cache_contrastive(encoders, a, b, k) for k in (4, 8)}
    assert runs[4].peak_saved_bytes == runs[4].encoder_graph_bytes > runs[4].loss_graph_bytes
    assert runs[8].peak_saved_bytes == runs[8].loss_graph_bytes > runs[8].encoder_graph_bytes


def test_info_nce_with_two_pairs_is_a_two_way_choice():
    z = torch.eye(2, dtype=torch.float64)
    expected = math.log(1 + math.exp(-1 / 0.5))  # cosine 1 for the partner, 0 for the negative
    assert math.isclose(float(info_nce(z, z, 0.5)), expected, rel_tol=1e-12)


@pytest.mark.parametrize("call, exc, match", [
    (lambda e, a, b: info_nce(a, b, 0.0), ValueError, "temperature"),
    (lambda e, a, b: info_nce(a, b, -1.0), ValueError, "temperature"),
    (lambda e, a, b: info_nce(a, b[:3], 0.1), ValueError, "za and zb"),
    (lambda e, a, b: info_nce(a[:1], b[:1], 0.1), ValueError, "at least 2"),
    (lambda e, a, b: naive_accumulated_contrastive(e, a, b, 16), ValueError, "accumulation_steps"),
    (lambda e, a, b: gradient_cache_contrastive(e, a, b, 3), ValueError, "accumulation_steps"),
    (lambda e, a, b: gradient_cache_contrastive(e, a, b, 8), ValueError, "at least 2"),
    (lambda e, a, b: full_batch_contrastive(e, a, b[:4]), ValueError, "paired"),
    (lambda e, a, b: full_batch_contrastive(torch.nn.Linear(2, 2), a, b), TypeError, "encoders"),
    (lambda e, a, b: make_pairs(1), ValueError, "num_pairs"),
])
def test_bad_input_names_the_parameter(call, exc, match):
    a, b = make_pairs(8, seed=0)
    with pytest.raises(exc, match=match):
        call(make_encoders(seed=0), a, b)


def test_sizes_past_the_ceiling_are_refused_before_allocating(before_allocating, monkeypatch):
    from widgets.core.config import BudgetError
    with before_allocating(), pytest.raises(BudgetError, match=r"make_pairs\(num_pairs=100000, dim=4096\), float64 "
                                            r"would need about 15\.4 GB, over this lab's limit of 1\.0 GB"):
        make_pairs(100_000, 4096)
    monkeypatch.setenv("LAB_MEMORY_LIMIT_MB", "100")  # the widest towers (768 MB) fit the default ceiling only
    with before_allocating(), pytest.raises(BudgetError, match=r"make_encoders\(dim=4096, embed_dim=4096, hidden=4096\) "
                                            r"would need about 768 MB, over this lab's limit of 100 MB"):
        make_encoders(4096, 4096, 4096)


def test_a_similarity_matrix_past_the_ceiling_is_refused_before_the_forward_pass(before_allocating):
    from widgets.core.config import BudgetError
    encoders = make_encoders(dim=1, embed_dim=1, hidden=1)
    a = b = torch.ones(20_000, 1, dtype=torch.float64)  # 20,000 pairs: the scores alone are 20,000 x 20,000
    for run in (lambda: full_batch_contrastive(encoders, a, b), lambda: gradient_cache_contrastive(encoders, a, b, 100)):
        with before_allocating(), pytest.raises(BudgetError, match=r"InfoNCE over 20000 pairs at once, 20000 x 20000 "
                                                r"float64 scores would need about 17\.9 GB, over this lab's limit of 1\.0 GB"):
            run()
    # plain accumulation scores each micro-batch of 200 on its own: 2 MB, allowed
    assert naive_accumulated_contrastive(encoders, a, b, 100).forward_examples == 20_000


def test_notebook_sizes_pass_the_ceiling(before_allocating):
    a, b = make_pairs(num_pairs=64, dim=8, seed=0)  # notebook researcher_2's sizes, under the default ceiling
    encoders = make_encoders(dim=8, embed_dim=8, hidden=512, seed=0)
    assert torch.allclose(full_batch_contrastive(encoders, a, b).grad, gradient_cache_contrastive(encoders, a, b, 4).grad)
