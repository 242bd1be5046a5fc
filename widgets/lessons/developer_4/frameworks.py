"""What the framework adapters share: the loader they hand a framework, a micro-batch's item count, the versions."""
from __future__ import annotations

from importlib import metadata

import torch
from torch.utils.data import BatchSampler, DataLoader, Sampler, TensorDataset

from widgets.core.accumulation import real_tokens
from widgets.core.config import check_int

FRAMEWORKS = ("torch", "accelerate", "pytorch-lightning")


def count_items(targets: torch.Tensor) -> int:
    """The items a micro-batch's mean loss averages over: real tokens for token ids, every value otherwise."""
    if targets.is_floating_point():
        return targets.numel()
    return real_tokens(targets)


class _EpochSlice(Sampler):
    """Epoch e's examples: those of micro-batches e*E to e*E + E - 1, so that the epochs, read one after another, are
    the auditor's micro-batches once each. Lightning and Accelerate call `set_epoch` before each epoch."""

    def __init__(self, starts: list[int], epoch_batches: int):
        self.starts, self.epoch_batches, self.epoch = starts, epoch_batches, 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def _range(self) -> range:
        first = self.epoch * self.epoch_batches
        return range(self.starts[first], self.starts[first + self.epoch_batches])

    def __iter__(self):
        return iter(self._range())

    def __len__(self) -> int:
        return len(self._range())


def epochs_of(batches: list, epoch_batches: int | None) -> int:
    """How many epochs of `epoch_batches` micro-batches the batches make (one epoch of all of them for None)."""
    if epoch_batches is None:
        return 1
    if len(batches) % epoch_batches:
        raise ValueError(f"epoch_batches must divide the {len(batches)} micro-batches, got {epoch_batches}")
    return len(batches) // epoch_batches


def loader_of(batches, epoch_batches: int | None = None) -> DataLoader:
    """A DataLoader that yields the auditor's (inputs, targets) micro-batches again, in order; with `epoch_batches`,
    `epoch_batches` of them per epoch, each epoch the next ones."""
    batches = list(batches)
    inputs, targets = torch.cat([x for x, _ in batches]), torch.cat([y for _, y in batches])
    dataset, b = TensorDataset(inputs, targets), len(batches[0][0])
    if epoch_batches is None:
        return DataLoader(dataset, batch_size=b, shuffle=False)
    epochs_of(batches, epoch_batches)
    starts = [b * i for i in range(len(batches))] + [len(inputs)]  # only the last micro-batch may be short
    return DataLoader(dataset, batch_sampler=BatchSampler(_EpochSlice(starts, epoch_batches), b, drop_last=False))


def checked_epoch_batches(epoch_batches: int | None) -> int | None:
    return None if epoch_batches is None else check_int("epoch_batches", epoch_batches, 1, 256)


def framework_versions() -> dict[str, str]:
    """The installed version of torch and of each audited framework, by distribution name."""
    return {name: metadata.version(name) for name in FRAMEWORKS}
