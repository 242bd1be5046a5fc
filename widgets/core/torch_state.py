"""Run lab code under a known torch state (a learner's float16 default or no_grad flips no verdict), then give theirs back.

The thread count is part of it: the lab's tiny models run fastest on one thread, above all on a shared CPU."""
from __future__ import annotations

import contextlib
from typing import Iterator

import torch


@contextlib.contextmanager
def torch_threads(count: int | None = 1) -> Iterator[None]:
    """Run the block with `count` torch threads (None: as they are), then give the caller's count back."""
    before = torch.get_num_threads()
    if count is not None and count != before:  # a change rebuilds torch's thread pool: only when needed
        torch.set_num_threads(count)
    try:
        yield
    finally:
        if torch.get_num_threads() != before:
            torch.set_num_threads(before)


def one_thread() -> contextlib.AbstractContextManager:
    """`torch_threads(1)`: one thread for the block, the caller's count after."""
    return torch_threads(1)


@contextlib.contextmanager
def known_torch_state(threads: int | None = 1) -> Iterator[None]:
    """Grad on, inference mode off, float32 on the CPU, deterministic and anomaly flags off, `threads` threads."""
    saved = (
        torch.is_grad_enabled(),
        torch.get_default_dtype(),
        torch.get_default_device(),
        torch.are_deterministic_algorithms_enabled(),
        torch.is_deterministic_algorithms_warn_only_enabled(),
        torch.is_anomaly_enabled(),
        torch.is_anomaly_check_nan_enabled(),
    )
    grad, dtype, device, deterministic, warn_only, anomaly, check_nan = saved
    try:
        torch.set_default_dtype(torch.float32)
        if device.type != "cpu":  # set only when needed: a default device is a mode on every call
            torch.set_default_device("cpu")
        if deterministic:  # the first call imports torch._inductor (seconds): only when it changes something
            torch.use_deterministic_algorithms(False)
        if anomaly:
            torch.autograd.set_detect_anomaly(False)
        with torch_threads(threads), torch.inference_mode(False), torch.enable_grad():
            yield
    finally:
        torch.set_grad_enabled(grad)
        torch.set_default_dtype(dtype)
        if device.type != "cpu":
            torch.set_default_device(device)
        if (torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled()) \
                != (deterministic, warn_only):
            torch.use_deterministic_algorithms(deterministic, warn_only=warn_only)
        if (torch.is_anomaly_enabled(), torch.is_anomaly_check_nan_enabled()) != (anomaly, check_nan):
            torch.autograd.set_detect_anomaly(anomaly, check_nan=check_nan)
