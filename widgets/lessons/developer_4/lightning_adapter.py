"""PyTorch Lightning's documented accumulation recipe, as loops the auditor can run (one CPU epoch, nothing patched).

Lightning is imported only when a loop runs: it imports matplotlib through torch._dynamo."""
from __future__ import annotations

import contextlib
import functools
import logging
import warnings
from types import SimpleNamespace
from typing import Callable

from widgets.lessons.developer_4.frameworks import checked_epoch_batches, count_items, epochs_of, loader_of
from widgets.core.accumulation import windows
from widgets.core.config import check_float

Loop = Callable[..., list]


@functools.cache
def lightning_classes() -> SimpleNamespace:
    """The Lightning classes this adapter needs, defined on first use."""
    import pytorch_lightning as pl
    from pytorch_lightning.loggers import Logger
    from pytorch_lightning.plugins.precision import Precision

    class _ListLogger(Logger):
        """Keeps each dict of metrics Lightning sends, in memory; writes nothing."""

        def __init__(self):
            super().__init__()
            self.records: list[dict[str, float]] = []

        name = property(lambda self: "in_memory")
        version = property(lambda self: 0)

        def log_metrics(self, metrics, step=None):
            self.records.append(dict(metrics))

        def log_hyperparams(self, params, *args, **kwargs):
            pass

    class _StepAfterClosure(Precision):
        """Run Lightning's closure (forward, backward, clipping), then step: inside `optimizer.step`, the auditor
        (which records when step is entered) would see the pile before the window's last backward."""

        def optimizer_step(self, optimizer, model, closure, **kwargs):
            result = self._wrap_closure(model, optimizer, closure)
            optimizer.step(**kwargs)
            return result

    class AuditedModule(pl.LightningModule):
        """The auditor's model, optimizer and scheduler in the shape Lightning documents."""

        def __init__(self, model, optimizer, loss_fn, scheduler, exact: bool):
            super().__init__()
            self.model, self.loss_fn, self.exact = model, loss_fn, exact
            self._optimizer, self._scheduler = optimizer, scheduler
            self._window_items: list[int] = []
            self._window_sums: list[float] = []  # summed loss of each micro-batch so far in the window

        def on_train_epoch_start(self):
            if self.exact:  # read the epoch's batches ahead: the items of each window of K batches
                K, sizes = self.trainer.accumulate_grad_batches, [count_items(y) for _, y in self.trainer.train_dataloader]
                self._window_items = [sum(sizes[i] for i in window) for window in windows(len(sizes), K)]

        def training_step(self, batch, batch_idx):
            x, y = batch
            loss = self.loss_fn(self.model(x), y)
            if not self.exact:
                self.log("train_loss", loss)  # Lightning divides the returned loss by K
                return loss
            K = self.trainer.accumulate_grad_batches
            items = self._window_items[batch_idx // K]
            summed = loss * count_items(y)  # our loss is a mean over the micro-batch's items
            self._window_sums.append(summed.item())
            if batch_idx % K == K - 1 or batch_idx == self.trainer.num_training_batches - 1:
                self.log("train_loss", sum(self._window_sums) / items)  # the window's mean per item
                self._window_sums = []
            return summed * K / items  # x K because Lightning divides the returned loss by K

        def configure_optimizers(self):
            if self._scheduler is None:
                return self._optimizer
            return {"optimizer": self._optimizer, "lr_scheduler": {"scheduler": self._scheduler, "interval": "step"}}

    return SimpleNamespace(pl=pl, ListLogger=_ListLogger, StepAfterClosure=_StepAfterClosure,
                           AuditedModule=AuditedModule)


@contextlib.contextmanager
def _quiet():
    """Lightning's info lines and its data-loader-workers warning off for the run, then back as they were."""
    from pytorch_lightning.utilities.warnings import PossibleUserWarning

    log = logging.getLogger("pytorch_lightning")
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            # only the workers warning: one that names accumulate_grad_batches must reach the auditor
            warnings.filterwarnings("ignore", message=".*does not have many workers", category=PossibleUserWarning)
            # Lightning's use of a torch pytree class torch deprecates: nothing about accumulation
            warnings.filterwarnings("ignore", message=r"`isinstance\(treespec, LeafSpec\)`", category=FutureWarning)
            yield
    finally:
        log.setLevel(level)


def lightning_loop(clip_norm: float | None = None, exact: bool = False, epoch_batches: int | None = None) -> Loop:
    """`Trainer(accumulate_grad_batches=K, gradient_clip_val=clip_norm)` on a LightningModule, as a loop;
    `exact=True` normalises each loss by its window's item count; `epoch_batches` fits epochs of that many
    micro-batches (one epoch of all of them for None)."""
    clip_norm = None if clip_norm is None else check_float("clip_norm", clip_norm, 0.0, 1e6)
    if not isinstance(exact, bool):
        raise TypeError(f"exact must be True or False, got {exact!r}")
    epoch_batches = checked_epoch_batches(epoch_batches)

    def loop(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
        L, batches = lightning_classes(), list(batches)
        loader, logger = loader_of(batches, epoch_batches), L.ListLogger()
        with _quiet():
            trainer = L.pl.Trainer(
                accelerator="cpu", devices=1, max_epochs=epochs_of(batches, epoch_batches),
                accumulate_grad_batches=accumulation_steps,
                gradient_clip_val=clip_norm, gradient_clip_algorithm="norm", plugins=[L.StepAfterClosure()],
                logger=logger, log_every_n_steps=1, enable_checkpointing=False, enable_progress_bar=False,
                enable_model_summary=False, num_sanity_val_steps=0,
            )
            trainer.fit(L.AuditedModule(model, optimizer, loss_fn, scheduler, exact), train_dataloaders=loader)
        return [record["train_loss"] for record in logger.records if "train_loss" in record]

    loop.__name__ = loop.__qualname__ = "lightning_exact" if exact else "lightning_accumulate"
    return loop
