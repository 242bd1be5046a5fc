"""Where `no_sync` goes: one update's micro-steps on a DDP model, all-reduced once, by the last micro-step's backward."""
from __future__ import annotations

import contextlib

import torch


def accumulate_micro_steps(model: torch.nn.Module,
                           micro_batches: list[tuple[torch.Tensor, torch.Tensor]],
                           use_no_sync: bool = True) -> None:
    """Backward over one update's K micro-batches [(x, y), ...]; with `use_no_sync`, one all-reduce
    per update."""
    K = len(micro_batches)
    for micro_step, (x, y) in enumerate(micro_batches):
        # the update boundary: only here must the workers agree on the gradient
        is_last = micro_step == K - 1
        sync = contextlib.nullcontext() if (is_last or not use_no_sync) else model.no_sync()
        with sync:
            loss = torch.nn.functional.mse_loss(model(x), y) / K  # mean over b, then / K
            loss.backward()
