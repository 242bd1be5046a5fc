"""float16 loss scaling under accumulation: a GradScaler scales every micro-step's loss, unscales the completed
pile once, skips the whole update when any micro-step overflowed, and the schedule counts only updates taken."""
from __future__ import annotations

import torch

from widgets.core.config import FLOAT32, check_int, check_memory
from widgets.core.mistakes import loop_diff

IN_FEATURES, OUT_FEATURES = 32, 256
OUTPUT_SIZE = 0.01  # outputs and targets of this size: the gradients fall towards float16's smallest numbers
OUTLIER = 1e6  # one corrupt target: its gradient times the scale overflows float16 (largest 65504)

Window = list[tuple[torch.Tensor, torch.Tensor]]


def fp16_problem(updates: int, accumulation_steps: int, micro_batch_size: int,
                 overflow_at: tuple[int, int] | None = None, seed: int = 0) -> tuple[torch.nn.Linear, list[Window]]:
    """A float32 linear map 32 -> 256 with small outputs, and `updates` windows of K (inputs (b, 32), targets
    (b, 256)) micro-batches; `overflow_at` = (update, micro_step) holds one corrupt target of 1e6."""
    U = check_int("updates", updates, 1, 100)
    K = check_int("accumulation_steps", accumulation_steps, 1, 256)
    b = check_int("micro_batch_size", micro_batch_size, 1, 1024)
    check_int("seed", seed, 0, 2**31 - 1)
    if overflow_at is not None and not (0 <= overflow_at[0] < U and 0 <= overflow_at[1] < K):
        raise ValueError(f"overflow_at must be (update, micro_step) inside {U} updates of {K} micro-steps, "
                         f"got {overflow_at!r}")
    check_memory(f"fp16_problem({U}, {K}, {b})", U * K * b * (IN_FEATURES + OUT_FEATURES) * FLOAT32)
    g = torch.Generator().manual_seed(seed)
    model = torch.nn.Linear(IN_FEATURES, OUT_FEATURES)
    with torch.no_grad():
        model.weight.copy_(torch.randn(OUT_FEATURES, IN_FEATURES, generator=g) * OUTPUT_SIZE / IN_FEATURES**0.5)
        model.bias.zero_()
    x = torch.randn(U, K, b, IN_FEATURES, generator=g)
    y = OUTPUT_SIZE * torch.randn(U, K, b, OUT_FEATURES, generator=g)
    if overflow_at is not None:
        y[overflow_at][0, 0] = OUTLIER
    return model, [[(x[u, k], y[u, k]) for k in range(K)] for u in range(U)]


def float64_gradient(model: torch.nn.Module, window: Window) -> torch.Tensor:
    """The window's gradient in float64, one big batch: the mean squared error over all its examples; flat."""
    exact = torch.nn.Linear(model.in_features, model.out_features, dtype=torch.float64)
    exact.load_state_dict({name: p.double() for name, p in model.state_dict().items()})
    inputs, targets = (torch.cat(parts).double() for parts in zip(*window))
    torch.nn.functional.mse_loss(exact(inputs), targets).backward()
    return torch.cat([p.grad.reshape(-1) for p in exact.parameters()])


def train_fp16(model, optimizer, scheduler, scaler, windows, max_norm=1.0):
    """One update per window (equal micro-batches, forward in float16); per update: (scale, lr)."""
    record = []
    for window in windows:
        for inputs, targets in window:
            with torch.autocast(inputs.device.type, dtype=torch.float16):
                outputs = model(inputs)
            loss = torch.nn.functional.mse_loss(outputs.float(), targets) / len(window)
            scaler.scale(loss).backward()  # every micro-step, one scale: pile = scale x gradient
        scale = scaler.get_scale()  # the scale this whole window was built with
        scaler.unscale_(optimizer)  # once, the completed pile: the clip reads the true gradient
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
        scaler.step(optimizer)  # skipped if any micro-step left an inf or a nan in the pile
        scaler.update()  # once per window: lowers the scale after a skip
        if scaler.get_scale() >= scale:  # lowered only when the step was skipped
            scheduler.step()  # the schedule counts updates that happened
        optimizer.zero_grad(set_to_none=True)
        record.append((scale, scheduler.get_last_lr()[0]))
    return record


def train_fp16_schedule_always(model, optimizer, scheduler, scaler, windows, max_norm=1.0):
    """`train_fp16` with the scheduler stepped after every window, a skipped step too."""
    record = []
    for window in windows:
        for inputs, targets in window:
            with torch.autocast(inputs.device.type, dtype=torch.float16):
                outputs = model(inputs)
            loss = torch.nn.functional.mse_loss(outputs.float(), targets) / len(window)
            scaler.scale(loss).backward()  # every micro-step, one scale: pile = scale x gradient
        scale = scaler.get_scale()  # the scale this whole window was built with
        scaler.unscale_(optimizer)  # once, the completed pile: the clip reads the true gradient
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
        scaler.step(optimizer)  # skipped if any micro-step left an inf or a nan in the pile
        scaler.update()  # once per window: lowers the scale after a skip
        scheduler.step()  # BUG: after a skipped step too
        optimizer.zero_grad(set_to_none=True)
        record.append((scale, scheduler.get_last_lr()[0]))
    return record


def fp16_diff() -> str:
    """`train_fp16_schedule_always`'s body against `train_fp16`'s, the whole loop, as a unified diff without headers."""
    return loop_diff(train_fp16, train_fp16_schedule_always, context=100)
