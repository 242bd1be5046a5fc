"""What accumulation costs, measured: passes per update, and the memory autograd keeps for one
micro-batch's backward (`SavedTensorCounter`, weights aside: the part that grows with the batch)."""
from __future__ import annotations

from fractions import Fraction

import torch

from widgets.core.accumulation import make_model, make_regression_data
from widgets.core.config import check_int
from widgets.research.saved_bytes import SavedTensorCounter


def kept_for_backward(micro_batch_size: int, seed: int = 0) -> int:
    """Bytes autograd keeps for the backward pass of one micro-batch of the explorer's model, weights aside."""
    check_int("micro_batch_size", micro_batch_size, 1, 4096)
    model = make_model(seed)
    x, y = make_regression_data(micro_batch_size, seed)
    with SavedTensorCounter(model) as saved:
        torch.nn.functional.mse_loss(model(x), y)
    return saved.total - saved.parameter_bytes


def memory_share(accumulation_steps: int, micro_batch_size: int) -> Fraction:
    """What one micro-batch of b keeps for backward, as a fraction of one batch of K·b: measured, not assumed."""
    check_int("accumulation_steps", accumulation_steps, 1, 1024)
    big = kept_for_backward(accumulation_steps * micro_batch_size)
    return Fraction(kept_for_backward(micro_batch_size), big)
