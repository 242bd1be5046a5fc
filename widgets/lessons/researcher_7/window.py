"""A window of K pipeline steps around the two-stage pipeline: the correct gradient and three mistakes reported
in 2025-26, each a whole window loop, and a short Adam run that logs the loss and the gradient norm per update."""
from __future__ import annotations

import math
from typing import Callable, NamedTuple

import torch

from widgets.core.accumulation import GRAD_ATOL, GRAD_RTOL, flat_grad
from widgets.core.config import FLOAT32, check_float, check_int, check_memory
from widgets.core.mistakes import loop_diff
from widgets.lessons.researcher_7.pipeline import make_mlp, split_model, unsplit_gradient

Window = list[list[tuple[torch.Tensor, torch.Tensor]]]  # K pipeline steps, each m micro-batches (x, y)


def window_gradient(stage0: torch.nn.Module, stage1: torch.nn.Module,
                    window: list[list[tuple[torch.Tensor, torch.Tensor]]]) -> float:
    """Both stages' .grad for one update of K GPipe steps of m micro-batches; returns its loss."""
    n = sum(len(x) for step in window for x, _ in step)  # examples in the whole window
    logged = 0.0
    for step in window:  # K pipeline steps, one update
        held = []
        for x, y in step:  # every forward first (GPipe)
            h = stage0(x)
            h_received = h.detach().requires_grad_()  # the cut: stage 1 gets a plain tensor
            loss = torch.nn.functional.mse_loss(stage1(h_received), y)
            logged += loss.item() * len(x) / n  # the log: the window's mean loss, summed on its own
            held.append((h, h_received, loss * len(x) / n))  # n_i / n: one mean over the window
        for h, h_received, scaled in held:  # then every backward: each adds into .grad
            scaled.backward()
            h.backward(h_received.grad)  # the gradient crosses the cut back to stage 0
    return logged


def scale_every_step(stage0: torch.nn.Module, stage1: torch.nn.Module,
                     window: list[list[tuple[torch.Tensor, torch.Tensor]]]) -> float:
    """Both stages' .grad for one update of K GPipe steps of m micro-batches; returns its loss."""
    n = sum(len(x) for step in window for x, _ in step)  # examples in the whole window
    logged = 0.0
    for step in window:  # K pipeline steps, one update
        held = []
        for x, y in step:  # every forward first (GPipe)
            h = stage0(x)
            h_received = h.detach().requires_grad_()  # the cut: stage 1 gets a plain tensor
            loss = torch.nn.functional.mse_loss(stage1(h_received), y)
            logged += loss.item() * len(x) / n  # the log: the window's mean loss, summed on its own
            held.append((h, h_received, loss / len(window)))  # 1/K for the window ...
        for h, h_received, scaled in held:  # then every backward: each adds into .grad
            scaled.backward()
            h.backward(h_received.grad)  # the gradient crosses the cut back to stage 0
        for p in [*stage0.parameters(), *stage1.parameters()]:  # ... and scale_grads=True: the schedule
            p.grad /= len(step)  # divides the whole pile by its m micro-batches, after every step
    return logged


def scale_per_stage(stage0: torch.nn.Module, stage1: torch.nn.Module,
                    window: list[list[tuple[torch.Tensor, torch.Tensor]]]) -> float:
    """Both stages' .grad for one update of K GPipe steps of m micro-batches; returns its loss."""
    n = sum(len(x) for step in window for x, _ in step)  # examples in the whole window
    logged = 0.0
    for step in window:  # K pipeline steps, one update
        held = []
        for x, y in step:  # every forward first (GPipe)
            h = stage0(x)
            h_received = h.detach().requires_grad_()  # the cut: stage 1 gets a plain tensor
            loss = torch.nn.functional.mse_loss(stage1(h_received), y)
            logged += loss.item() * len(x) / n  # the log: the window's mean loss, summed on its own
            held.append((h, h_received, loss * len(x) / n))  # n_i / n: one mean over the window
        for h, h_received, scaled in held:  # then every backward: each adds into .grad
            scaled.backward()
            h.backward(h_received.grad * len(h) / n)  # stage 0 scales the gradient it received once more
    return logged


def grads_wiped(stage0: torch.nn.Module, stage1: torch.nn.Module,
                window: list[list[tuple[torch.Tensor, torch.Tensor]]]) -> float:
    """Both stages' .grad for one update of K GPipe steps of m micro-batches; returns its loss."""
    n = sum(len(x) for step in window for x, _ in step)  # examples in the whole window
    logged = 0.0
    for step in window:  # K pipeline steps, one update
        for p in [*stage0.parameters(), *stage1.parameters()]:  # the stages set up again (new shapes):
            p.grad = None  # their clean-up empties .grad, and the pile with it
        held = []
        for x, y in step:  # every forward first (GPipe)
            h = stage0(x)
            h_received = h.detach().requires_grad_()  # the cut: stage 1 gets a plain tensor
            loss = torch.nn.functional.mse_loss(stage1(h_received), y)
            logged += loss.item() * len(x) / n  # the log: the window's mean loss, summed on its own
            held.append((h, h_received, loss * len(x) / n))  # n_i / n: one mean over the window
        for h, h_received, scaled in held:  # then every backward: each adds into .grad
            scaled.backward()
            h.backward(h_received.grad)  # the gradient crosses the cut back to stage 0
    return logged


# Each mistake: its loop, and the report it reproduces.
WINDOW_MISTAKES: dict[str, tuple[Callable[..., float], str]] = {
    "scale at every step": (scale_every_step, "pytorch/torchtitan #1733"),
    "scale per stage": (scale_per_stage, "deepspeedai/DeepSpeed #8152"),
    "gradients wiped": (grads_wiped, "NVIDIA-NeMo/Automodel PR #3530"),
}


def window_diff(loop: Callable) -> str:
    """`loop`'s whole body against `window_gradient`'s, as a unified diff without headers (lines '+', '-', ' ')."""
    return loop_diff(window_gradient, loop, context=100)  # the whole loop


def make_windows(updates: int, accumulation_steps: int, micro_batches: int, micro_batch_size: int, width: int = 8,
                 seed: int = 0) -> list[Window]:
    """`updates` windows of K steps x m micro-batches x b examples: x random, y a fixed teacher's output plus noise."""
    U = check_int("updates", updates, 1, 1000)
    K = check_int("accumulation_steps", accumulation_steps, 1, 64)
    m = check_int("micro_batches", micro_batches, 1, 64)
    b = check_int("micro_batch_size", micro_batch_size, 1, 1024)
    check_int("width", width, 1, 1024)
    check_memory(f"make_windows({U}, {K}, {m}, {b}, width={width})", 2 * U * K * m * b * width * FLOAT32)
    teacher = make_mlp(depth=2, width=width, seed=seed + 1)
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(U, K, m, b, width, generator=g)
    with torch.no_grad():
        y = teacher(x) + 0.1 * torch.randn(x.shape, generator=g)
    return [[[(x[u, k, i], y[u, k, i]) for i in range(m)] for k in range(K)] for u in range(U)]


class TrainingLog(NamedTuple):
    """Per update, before the optimizer steps: the logged loss (the window's mean), the gradient's norm, stage 0's."""

    losses: list[float]
    grad_norms: list[float]
    stage0_norms: list[float]


def train_pipelined(loop: Callable[..., float], windows: list[Window], lr: float = 0.01, seed: int = 0) -> TrainingLog:
    """Adam on a fresh two-stage MLP (`make_mlp(4, width, seed)`), `loop` filling .grad for each window."""
    check_float("lr", lr, 0.0, 1.0)
    stages = split_model(make_mlp(depth=4, width=windows[0][0][0][0].shape[-1], seed=seed), 2)
    optimizer = torch.optim.Adam([p for stage in stages for p in stage.parameters()], lr=lr)
    log = TrainingLog([], [], [])
    for window in windows:
        log.losses.append(loop(*stages, window))
        norms = [float(torch.cat([p.grad.reshape(-1) for p in stage.parameters()]).norm()) for stage in stages]
        log.grad_norms.append(math.hypot(*norms))
        log.stage0_norms.append(norms[0])
        optimizer.step()  # once per window: the update
        optimizer.zero_grad(set_to_none=True)
    return log


class Ratios(NamedTuple):
    """A loop's gradient on one window against the unsplit model's: norm ratios, and allclose."""

    whole: float
    stage0: float
    stage1: float
    allclose: bool


def gradient_ratios(loop: Callable[..., float], window: Window, seed: int = 0) -> Ratios:
    """Run `loop` on one window from `make_mlp(4, width, seed)` and compare with one backward of the unsplit model."""
    model = make_mlp(depth=4, width=window[0][0][0].shape[-1], seed=seed)
    stages = split_model(model, 2)
    reference = unsplit_gradient(model, [pair for step in window for pair in step])
    loop(*stages, window)
    cut = sum(p.numel() for p in stages[0].parameters())
    grad = flat_grad(model)
    norm = [float(part.norm()) for part in (grad, grad[:cut], grad[cut:])]
    truth = [float(part.norm()) for part in (reference, reference[:cut], reference[cut:])]
    return Ratios(*(a / b for a, b in zip(norm, truth)),
                  torch.allclose(grad, reference, rtol=GRAD_RTOL, atol=GRAD_ATOL))
