"""estimate_noise_scale against the closed-form B_simple of linear regression, and its input checks."""
import math

import pytest
import torch

from widgets.research.noise_scale import (
    b_simple_from_norms, ema, estimate_noise_scale, exact_noise_scales, linear_regression_b_simple,
    linear_regression_micro_grads, smoothed_b_simple,
)

SETTINGS = [  # dim, noise_std, distance, K, b
    (4, 0.5, 1.0, 4, 8),
    (16, 1.0, 0.5, 8, 4),
    (8, 0.0, 1.0, 2, 16),
    (32, 2.0, 2.0, 4, 2),
]


@pytest.mark.parametrize("dim, noise_std, distance, k, b", SETTINGS)
def test_estimator_meets_the_analytic_b_simple_within_10_percent(dim, noise_std, distance, k, b):
    grads = linear_regression_micro_grads(dim, noise_std, distance, windows=2000, accumulation_steps=k,
                                          micro_batch_size=b, seed=3)
    est = estimate_noise_scale(grads, b)
    exact = linear_regression_b_simple(dim, noise_std, distance)
    assert est.b_simple == pytest.approx(exact, rel=0.10)
    # the two parts on their own: |G|^2 = 4 distance^2 and tr(Sigma) = 4((d+1) r^2 + d sigma^2)
    assert est.grad_sq == pytest.approx(4 * distance**2, rel=0.10)
    assert est.trace_sigma == pytest.approx(4 * ((dim + 1) * distance**2 + dim * noise_std**2), rel=0.10)


def test_closed_form_gradients_are_the_autograd_gradients():
    grads = linear_regression_micro_grads(3, 0.7, 1.5, windows=1, accumulation_steps=2, micro_batch_size=5, seed=0)
    g = torch.Generator().manual_seed(0)
    delta = torch.randn(3, generator=g, dtype=torch.float64)
    delta *= 1.5 / delta.norm()
    x = torch.randn(1, 2, 5, 3, generator=g, dtype=torch.float64)
    eps = 0.7 * torch.randn(1, 2, 5, generator=g, dtype=torch.float64)
    for k in range(2):
        w = delta.clone().requires_grad_()
        # with w = w* + delta the residual of each example is x . delta - eps
        residual = x[0, k] @ w - eps[0, k]
        (residual.pow(2).mean()).backward()
        assert torch.allclose(w.grad, grads[0, k])


def test_one_window_and_many_windows_agree_on_shape():
    grads = linear_regression_micro_grads(4, 0.5, 1.0, windows=3, accumulation_steps=4, micro_batch_size=8)
    one = estimate_noise_scale(grads[0], 8)
    assert len(one.per_window) == 1
    many = estimate_noise_scale(grads, 8)
    assert len(many.per_window) == 3
    assert many.grad_sq == pytest.approx(sum(estimate_noise_scale(g, 8).grad_sq for g in grads) / 3)


def test_ratio_is_taken_after_averaging():
    grads = linear_regression_micro_grads(4, 0.5, 1.0, windows=200, accumulation_steps=2, micro_batch_size=2)
    est = estimate_noise_scale(grads, 2)
    assert est.b_simple == pytest.approx(est.trace_sigma / est.grad_sq)


def test_by_hand_formula_matches_the_estimator():
    grads = linear_regression_micro_grads(5, 1.0, 1.0, windows=1, accumulation_steps=4, micro_batch_size=3)
    small = float(grads[0].pow(2).sum(-1).mean())
    big = float(grads[0].mean(0).pow(2).sum())
    assert b_simple_from_norms(small, big, 3, 4) == pytest.approx(estimate_noise_scale(grads, 3).b_simple)


def test_pure_noise_gives_an_unbounded_scale():
    assert b_simple_from_norms(10.0, 0.0, 1, 2) == math.inf


def test_ema_and_smoothing():
    assert ema([2.0, 2.0, 2.0], 0.9) == pytest.approx([2.0, 2.0, 2.0])  # bias-corrected: no start-up dip
    assert smoothed_b_simple([1.0, 1.0], [5.0, 15.0], 0.0) == [5.0, 15.0]
    with pytest.raises(ValueError, match="decay"):
        ema([1.0], 1.0)


@pytest.mark.parametrize("grads, b, error, words", [
    ([[1.0, 2.0]], 4, TypeError, "micro_grads"),
    (torch.zeros(3, 1, 5), 4, ValueError, "K >= 2"),
    (torch.zeros(1, 5), 4, ValueError, "K >= 2"),
    (torch.zeros(5), 4, ValueError, "micro_grads must have shape"),
    (torch.zeros(2, 3, 4, 5), 4, ValueError, "micro_grads must have shape"),
    (torch.full((2, 3), float("nan")), 4, ValueError, "finite"),
    (torch.zeros(2, 3, dtype=torch.int64), 4, ValueError, "floating"),
    (torch.zeros(2, 3), 0, ValueError, "micro_batch_size"),
    (torch.zeros(2, 3), 2.5, TypeError, "micro_batch_size"),
])
def test_bad_input_names_the_parameter(grads, b, error, words):
    with pytest.raises(error, match=words):
        estimate_noise_scale(grads, b)


def test_bad_settings_name_the_parameter():
    with pytest.raises(ValueError, match="distance"):
        linear_regression_b_simple(4, 1.0, 0.0)
    with pytest.raises(ValueError, match="dim"):
        linear_regression_micro_grads(0, 1.0, 1.0, 1, 2, 2)


def test_sizes_past_the_ceiling_are_refused_before_allocating(before_allocating):
    from widgets.core.config import BudgetError
    with before_allocating(), pytest.raises(
            BudgetError, match=r"linear_regression_micro_grads\(dim=1000, windows=10000, accumulation_steps=8, "
                               r"micro_batch_size=64\) would need about 39\.5 GB, over this lab's limit of 1\.0 GB"):
        linear_regression_micro_grads(1000, 1.0, 1.0, windows=10_000, accumulation_steps=8, micro_batch_size=64)


def test_notebook_sizes_pass_the_ceiling(before_allocating):
    for dim, noise_std, distance, K, b in SETTINGS:  # notebook researcher_3's sizes
        grads = linear_regression_micro_grads(dim, noise_std, distance, windows=2000, accumulation_steps=K,
                                              micro_batch_size=b, seed=3)
        assert grads.shape == (2000, K, dim)


# --- B_noise, exactly, from every example's gradient and the Hessian ---------------------------

def test_exact_noise_scales_against_direct_formulas():
    g = torch.Generator().manual_seed(0)
    grads = torch.randn(50, 6, generator=g, dtype=torch.float64) + 0.5
    a = torch.randn(6, 6, generator=g, dtype=torch.float64)
    hessian = a @ a.T + torch.eye(6, dtype=torch.float64)
    got = exact_noise_scales(grads, hessian)
    mean = grads.mean(0)
    sigma = torch.cov(grads.T, correction=0)
    assert got.b_simple == pytest.approx(float(sigma.trace() / (mean @ mean)))
    assert got.b_noise == pytest.approx(float(torch.trace(hessian @ sigma) / (mean @ hessian @ mean)))
    assert got.sharpness == pytest.approx(float(torch.linalg.eigvalsh(hessian).max()))
    # a Hessian that curves equally in every direction makes the two scales one
    same = exact_noise_scales(grads, 3.0 * torch.eye(6, dtype=torch.float64))
    assert same.b_noise == pytest.approx(same.b_simple)


def test_b_noise_of_linear_regression_is_the_closed_form():
    # y = x . w* + eps, model at w* + delta: the Hessian of the squared error is 2 X^T X / n, about 2 I
    g = torch.Generator().manual_seed(0)
    n, d, sigma, r = 200_000, 4, 0.5, 1.0
    x = torch.randn(n, d, generator=g, dtype=torch.float64)
    delta = torch.randn(d, generator=g, dtype=torch.float64)
    delta *= r / delta.norm()
    eps = sigma * torch.randn(n, generator=g, dtype=torch.float64)
    grads = 2 * x * (x @ delta - eps).unsqueeze(1)
    got = exact_noise_scales(grads, 2 * x.T @ x / n)
    assert got.b_noise == pytest.approx(linear_regression_b_simple(d, sigma, r), rel=0.03)
    assert got.b_simple == pytest.approx(linear_regression_b_simple(d, sigma, r), rel=0.03)
