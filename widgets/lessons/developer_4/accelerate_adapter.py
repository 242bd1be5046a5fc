"""Hugging Face Accelerate's documented accumulation recipes, as loops the auditor can run.

Each loop hands the auditor's objects to `Accelerator.prepare` (CPU, nothing patched), so the auditor sees every call."""
from __future__ import annotations

import math
from typing import Callable

import torch
from accelerate import Accelerator

from widgets.lessons.developer_4.frameworks import checked_epoch_batches, count_items, epochs_of, loader_of
from widgets.core.config import check_float

Loop = Callable[..., list]


def _prepared(model, optimizer, batches, accumulation_steps: int, scheduler, epoch_batches=None):
    """An Accelerator for K, and the auditor's objects prepared by it over a loader of the same micro-batches."""
    accelerator = Accelerator(gradient_accumulation_steps=accumulation_steps, cpu=True)
    objects = [model, optimizer, loader_of(batches, epoch_batches)] + ([scheduler] if scheduler is not None else [])
    prepared = accelerator.prepare(*objects)
    return accelerator, *prepared[:3], (prepared[3] if scheduler is not None else None)


def _checked_clip_norm(clip_norm: float | None) -> float | None:
    return None if clip_norm is None else check_float("clip_norm", clip_norm, 0.0, 1e6)


def accelerate_loop(clip_norm: float | None = None, clip_on_sync_only: bool = True,
                    epoch_batches: int | None = None) -> Loop:
    """The documented `accelerator.accumulate(model)` recipe; `clip_norm` clips as documented, under
    `if accelerator.sync_gradients:`; `clip_on_sync_only=False` drops that `if` (a common slip);
    `epoch_batches` reads the micro-batches in epochs of that many (one epoch of all of them for None)."""
    clip_norm, epoch_batches = _checked_clip_norm(clip_norm), checked_epoch_batches(epoch_batches)
    if not isinstance(clip_on_sync_only, bool):
        raise TypeError(f"clip_on_sync_only must be True or False, got {clip_on_sync_only!r}")

    def accelerate_accumulate(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
        batches = list(batches)
        accelerator, model, optimizer, loader, scheduler = _prepared(
            model, optimizer, batches, accumulation_steps, scheduler, epoch_batches)
        logged = []
        try:
            for _epoch in range(epochs_of(batches, epoch_batches)):
                for x, y in loader:
                    with accelerator.accumulate(model):  # sets accelerator.sync_gradients: the one flag
                        loss = loss_fn(model(x), y)
                        accelerator.backward(loss)  # divides the loss by gradient_accumulation_steps
                        if clip_norm is not None and (accelerator.sync_gradients or not clip_on_sync_only):
                            accelerator.clip_grad_norm_(model.parameters(), clip_norm)
                        optimizer.step()  # skipped by the prepared optimizer until sync_gradients
                        if scheduler is not None:
                            scheduler.step()
                        optimizer.zero_grad()
                        if accelerator.sync_gradients:
                            logged.append(loss.item())
        finally:
            accelerator.free_memory()
        return logged

    return accelerate_accumulate


def accelerate_items_loop(clip_norm: float | None = None) -> Loop:
    """The documented recipe for item-normalised losses ("training samples of variable size"): the window read
    ahead, each summed loss x K / the window's items (`accelerator.backward` divides by K), one step per window."""
    clip_norm = _checked_clip_norm(clip_norm)

    def accelerate_num_items(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
        K = accumulation_steps
        accelerator, model, optimizer, loader, scheduler = _prepared(model, optimizer, batches, K, scheduler)
        iterator, logged = iter(loader), []
        remainder = len(loader) % K or K
        total_updates = math.ceil(len(loader) / K)
        try:
            for update in range(total_updates):
                window = [next(iterator) for _ in range(K if update < total_updates - 1 else remainder)]
                # the recipe counts the items (tokens that are not padding) of the whole window first
                num_items = accelerator.gather(torch.tensor(sum(count_items(y) for _, y in window))).sum().item()
                summed_losses = 0.0
                for x, y in window:
                    summed = loss_fn(model(x), y) * count_items(y)  # the recipe wants a summed loss; ours is a mean
                    summed_losses += summed.item()
                    # x K because accelerator.backward divides by K again (x num_processes, 1 here, for DDP)
                    accelerator.backward(summed * K * accelerator.num_processes / num_items)
                if clip_norm is not None:
                    accelerator.clip_grad_norm_(model.parameters(), clip_norm)
                optimizer.step()
                if scheduler is not None:
                    scheduler.step()
                optimizer.zero_grad()
                logged.append(summed_losses / num_items)  # the window's mean loss per item
        finally:
            accelerator.free_memory()
        return logged

    return accelerate_num_items
