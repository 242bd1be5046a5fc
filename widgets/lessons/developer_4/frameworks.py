"""What the framework adapters share: the loader they hand a framework, a micro-batch's item count, the versions."""
from __future__ import annotations

from importlib import metadata

import torch
from torch.utils.data import DataLoader, TensorDataset

from widgets.core.accumulation import real_tokens

FRAMEWORKS = ("torch", "accelerate", "pytorch-lightning")


def count_items(targets: torch.Tensor) -> int:
    """The items a micro-batch's mean loss averages over: real tokens for token ids, every value otherwise."""
    if targets.is_floating_point():
        return targets.numel()
    return real_tokens(targets)


def loader_of(batches) -> DataLoader:
    """A DataLoader that yields the auditor's (inputs, targets) micro-batches again, in order."""
    batches = list(batches)
    inputs, targets = torch.cat([x for x, _ in batches]), torch.cat([y for _, y in batches])
    return DataLoader(TensorDataset(inputs, targets), batch_size=len(batches[0][0]), shuffle=False)


def framework_versions() -> dict[str, str]:
    """The installed version of torch and of each audited framework, by distribution name."""
    return {name: metadata.version(name) for name in FRAMEWORKS}
