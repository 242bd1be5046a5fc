"""The gradient noise scale B_simple = tr(Sigma) / |G|^2 (McCandlish et al., 2018), for free from the accumulation
window: its K micro-batches (b each) and their mean (K b) are the two batch sizes the unbiased estimators need."""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from widgets.core.config import check_float, check_int, check_memory


@dataclass(frozen=True)
class NoiseScale:
    """What `estimate_noise_scale` found: B_simple in examples, |G|^2, tr(Sigma) of one example, each window's ratio."""

    b_simple: float
    grad_sq: float
    trace_sigma: float
    per_window: tuple[float, ...]


def _ratio(trace: float, grad_sq: float) -> float:
    # a non-positive |G|^2 estimate means the noise swamps the signal: the scale is unbounded
    return trace / grad_sq if grad_sq > 0 else math.inf


def window_noise(micro_grads: torch.Tensor,
                 micro_batch_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Unbiased |G|^2 and tr(Sigma) of each window; micro_grads (windows, K, P) -> two (windows,)
    tensors."""
    K = micro_grads.shape[1]
    small_sq = micro_grads.pow(2).sum(-1).mean(-1)  # mean |G_b|^2 over the K micro-batches
    big_sq = micro_grads.mean(1).pow(2).sum(-1)  # |G_Kb|^2 of their mean: the accumulated gradient
    b_small, b_big = micro_batch_size, K * micro_batch_size
    grad_sq = (b_big * big_sq - b_small * small_sq) / (b_big - b_small)
    trace_sigma = (small_sq - big_sq) / (1 / b_small - 1 / b_big)
    return grad_sq, trace_sigma


def estimate_noise_scale(micro_grads: torch.Tensor, micro_batch_size: int) -> NoiseScale:
    """B_simple = tr(Sigma) / |G|^2 from micro_grads (windows, K, P) or (K, P), each micro-batch's mean gradient.

    `window_noise`'s two estimates are averaged over the windows before the ratio (a ratio of noisy estimates is
    biased); inf if |G|^2 <= 0."""
    if not isinstance(micro_grads, torch.Tensor):
        raise TypeError(f"micro_grads must be a torch.Tensor of shape (windows, K, P) or (K, P), "
                        f"got {type(micro_grads).__name__}")
    if micro_grads.dim() == 2:
        micro_grads = micro_grads.unsqueeze(0)
    if micro_grads.dim() != 3:
        raise ValueError(f"micro_grads must have shape (windows, K, P) or (K, P), got {tuple(micro_grads.shape)}")
    windows, k, p = micro_grads.shape
    if windows < 1 or p < 1:
        raise ValueError(f"micro_grads must hold at least one window and one parameter, got {tuple(micro_grads.shape)}")
    if k < 2:
        raise ValueError(f"micro_grads must hold K >= 2 micro-batches per window (two batch sizes are needed), "
                         f"got K = {k} in shape {tuple(micro_grads.shape)}")
    if not micro_grads.is_floating_point() or not torch.isfinite(micro_grads).all():
        raise ValueError("micro_grads must be finite floating-point gradients")
    b = check_int("micro_batch_size", micro_batch_size, 1)
    grad_sq, trace = window_noise(micro_grads.detach().double(), b)
    mean_grad_sq, mean_trace = float(grad_sq.mean()), float(trace.mean())
    per_window = tuple(_ratio(float(t), float(s)) for t, s in zip(trace, grad_sq))
    return NoiseScale(_ratio(mean_trace, mean_grad_sq), mean_grad_sq, mean_trace, per_window)


def b_simple_from_norms(small_sq: float, big_sq: float, micro_batch_size: int, accumulation_steps: int) -> float:
    """B_simple of one window from its micro-gradients' mean squared norm and their mean's squared norm."""
    b, k = micro_batch_size, accumulation_steps
    grad_sq = (k * b * big_sq - b * small_sq) / (k * b - b)
    trace = (small_sq - big_sq) / (1 / b - 1 / (k * b))
    return _ratio(trace, grad_sq)


def linear_regression_b_simple(dim: int, noise_std: float, distance: float) -> float:
    """B_simple of linear regression (x ~ N(0, I)) at distance |delta| from the optimum, by Isserlis' theorem."""
    d = check_int("dim", dim, 1)
    sigma = check_float("noise_std", noise_std, 0.0, math.inf, low_inclusive=True)
    r = check_float("distance", distance, 0.0, math.inf)
    return d + 1 + d * sigma**2 / r**2


def linear_regression_micro_grads(
    dim: int, noise_std: float, distance: float, windows: int, accumulation_steps: int,
    micro_batch_size: int, seed: int = 0,
) -> torch.Tensor:
    """Micro-batch gradients 2/b X^T (X delta - eps) of that setting, shape (windows, K, dim), b fresh examples each."""
    d = check_int("dim", dim, 1)
    sigma = check_float("noise_std", noise_std, 0.0, math.inf, low_inclusive=True)
    r = check_float("distance", distance, 0.0, math.inf)
    n_w = check_int("windows", windows, 1)
    k = check_int("accumulation_steps", accumulation_steps, 2)
    b = check_int("micro_batch_size", micro_batch_size, 1)
    seed = check_int("seed", seed, 0)
    # float64: x (windows, K, b, dim); eps, its noise and the residual (windows, K, b); the result (windows, K, dim)
    check_memory(f"linear_regression_micro_grads(dim={d}, windows={n_w}, accumulation_steps={k}, "
                 f"micro_batch_size={b})", n_w * k * (b * (d + 4) + 2 * d) * 8)
    g = torch.Generator().manual_seed(seed)
    delta = torch.randn(d, generator=g, dtype=torch.float64)
    delta *= r / delta.norm()
    x = torch.randn(n_w, k, b, d, generator=g, dtype=torch.float64)
    eps = sigma * torch.randn(n_w, k, b, generator=g, dtype=torch.float64)
    residual = x @ delta - eps                      # (windows, K, b)
    return 2 / b * torch.einsum("wkbd,wkb->wkd", x, residual)


def ema(values: list[float] | tuple[float, ...], decay: float) -> list[float]:
    """Exponential moving average with Adam's bias correction; entry t uses values[: t + 1]."""
    decay = check_float("decay", decay, 0.0, 1.0, low_inclusive=True)
    if decay == 1.0:
        raise ValueError("decay must be a number in [0.0, 1.0), got 1.0")
    out, avg = [], 0.0
    for t, v in enumerate(values, start=1):
        avg = decay * avg + (1 - decay) * float(v)
        out.append(avg / (1 - decay**t))
    return out


def smoothed_b_simple(grad_sq: list[float], trace_sigma: list[float], decay: float = 0.9) -> list[float]:
    """B_simple over training as the paper smooths it: EMAs of |G|^2 and tr(Sigma), then their ratio."""
    return [_ratio(t, s) for s, t in zip(ema(grad_sq, decay), ema(trace_sigma, decay))]


@dataclass(frozen=True)
class ExactNoise:
    """McCandlish et al.'s (2018) two noise scales at one point, in examples: `b_noise` = tr(H Sigma) / (G^T H G)
    weighs noise and gradient by the Hessian; `b_simple` assumes equal curvature in every direction."""

    b_simple: float
    b_noise: float
    grad_sq: float        # |G|^2
    trace_sigma: float    # tr(Sigma)
    curvature: float      # G^T H G
    trace_h_sigma: float  # tr(H Sigma)
    sharpness: float      # the largest eigenvalue of H: gradient descent is stable for learning rates below 2 / it


def exact_noise_scales(per_example_grads: torch.Tensor, hessian: torch.Tensor) -> ExactNoise:
    """B_simple and B_noise of a finite data set from per-example gradients (n, P) and the mean loss's Hessian (P, P)."""
    grads, h = per_example_grads.detach().double(), hessian.detach().double()
    g = grads.mean(0)
    centred = grads - g
    sigma = centred.T @ centred / len(grads)  # (P, P): the covariance of one example's gradient
    grad_sq, trace = float(g @ g), float(sigma.trace())
    curvature, trace_h = float(g @ h @ g), float((h * sigma).sum())  # (h * sigma).sum() = tr(H Sigma), both symmetric
    sharpness = float(torch.linalg.eigvalsh((h + h.T) / 2)[-1])
    return ExactNoise(_ratio(trace, grad_sq), _ratio(trace_h, curvature), grad_sq, trace, curvature, trace_h, sharpness)
