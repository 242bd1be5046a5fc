"""What the framework adapters share: the data loader they hand a framework, the item count of
a micro-batch, and the versions they were audited with.

The adapters themselves are `widgets.lessons.developer_4.accelerate_adapter` (Hugging Face Accelerate) and
`widgets.lessons.developer_4.lightning_adapter` (PyTorch Lightning). Importing this module imports neither
framework.
"""
from __future__ import annotations

from importlib import metadata

import torch
from torch.utils.data import DataLoader, TensorDataset

from widgets.core.shared import real_tokens

FRAMEWORKS = ("torch", "accelerate", "pytorch-lightning")


def count_items(targets: torch.Tensor) -> int:
    """The items a micro-batch's mean loss averages over: for token ids the targets that are not
    padding (Accelerate's recipe counts `labels.ne(-100)`), for real-valued targets every value."""
    if targets.is_floating_point():
        return targets.numel()
    return real_tokens(targets)


def loader_of(batches) -> DataLoader:
    """A DataLoader that yields the same micro-batches again, in order: the auditor's (inputs,
    targets) pairs stacked into one TensorDataset, batch_size = the micro-batch size."""
    batches = list(batches)
    inputs, targets = torch.cat([x for x, _ in batches]), torch.cat([y for _, y in batches])
    return DataLoader(TensorDataset(inputs, targets), batch_size=len(batches[0][0]), shuffle=False)


def framework_versions() -> dict[str, str]:
    """The installed version of torch and of each audited framework, by distribution name."""
    return {name: metadata.version(name) for name in FRAMEWORKS}
