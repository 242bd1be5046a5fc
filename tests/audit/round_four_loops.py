"""Round four: loops in the shapes people ship, written by a second hand, each with its ground truth.

Every loop has the auditor's signature, `loop(model, optimizer, loss_fn, batches, accumulation_steps,
scheduler=None)` (and a keyword `comm` across ranks), and works on any model's `parameters()`.
`LOOPS` says, for each, whether its updates are the big batch's (`correct`), which mistake names a
report may give (`expected`; None where no name in widgets.core.mistakes fits yet), why, where it
holds (`settings`), what shows a wrong one wrong (`shows`), and phrases that would be false in its
report (`never_says`). `test_round_four_truth.py` proves each record without the auditor. The last
micro-batch of the auditor's problems is short (drop_last=False), so a loop that weighs micro-batches
1/K is wrong even without an uneven tail.
"""
from __future__ import annotations

import queue
import threading
from dataclasses import dataclass
from typing import Callable, NamedTuple

import torch
from torch.func import functional_call, grad, vmap

IGNORE_INDEX = -100  # the padding target, as widgets.core.accumulation has it


class Setting(NamedTuple):
    K: int
    tail: bool  # an uneven last window of K // 2 micro-batches
    world_size: int = 1

    @property
    def num_batches(self) -> int:
        return 2 * self.K + (self.K // 2 if self.tail else 0)


EVERY = tuple(Setting(K, tail) for K in (3, 4) for tail in (True, False))
WITH_TAIL = tuple(s for s in EVERY if s.tail)
NO_TAIL = tuple(s for s in EVERY if not s.tail)
ACROSS_RANKS = tuple(s._replace(world_size=2) for s in EVERY)
# the short last micro-batch shares its window with full ones (K = 3 with a tail leaves it alone in its window)
MIXED_LAST_WINDOW = tuple(s for s in EVERY if (s.num_batches - 1) % s.K > 0)
ALONE_LAST = tuple(s for s in EVERY if s not in MIXED_LAST_WINDOW)

# What shows a wrong loop wrong, from first principles (test_round_four_truth.py checks each):
WEIGHTS = "weights"  # the final weights differ from the big batch's, under plain SGD and with momentum
MOMENTUM = "momentum"  # the same weights under plain SGD, other ones with momentum or Adam
LOG = "log"  # the updates are right, the returned log is not one mean loss per update
MEMORY = "memory"  # the updates are right, the saved tensors alive at once grow with K
HANGS = "hangs"  # the loop never ends


@dataclass(frozen=True)
class Case:
    name: str
    family: str
    loop: Callable
    correct: bool
    expected: frozenset[str] | None  # names a report may give; frozenset() for a right loop
    why: str
    settings: tuple[Setting, ...] = EVERY
    problem: str = "regression"  # or "tokens" (padded sequences, the normaliser their real tokens)
    clip_norm: float | None = None  # the audit's clip_norm, and the big batch's clip
    shows: str = WEIGHTS  # a wrong loop only: what makes it wrong
    rtol: float = 1e-10  # how close a right loop's final weights come to the big batch's
    never_says: tuple[str, ...] = ()  # phrases (lower case) a report on this loop must not contain: false here


def audit_options(case: Case, setting: Setting) -> dict:
    """The keywords of audit_training_loop(case.loop, setting.K, **options) for this case and setting."""
    options = {"num_batches": setting.num_batches, "problem": case.problem}
    if setting.world_size > 1:
        options["world_size"] = setting.world_size
    if case.clip_norm is not None:
        options["clip_norm"] = case.clip_norm
    if case.shows == HANGS and not case.correct:
        options["time_limit_s"] = 3.0  # it never ends: no need to wait out the default limit
    if case.loop.__name__ == "compiled_inductor":
        # inductor builds C++ kernels at the first call: 21 s on a quiet 2-core machine with a cold
        # cache, more beside the other test processes; the default limit (30 s) would stop a right loop
        options["time_limit_s"] = 180.0
    return options


def share_of(batches, i, K):
    """n_i / n: micro-batch i's share of its window's examples."""
    start = i // K * K
    return len(batches[i][1]) / sum(len(y) for _, y in batches[start : start + K])


def real_tokens(labels):
    return (labels != IGNORE_INDEX).sum()  # an int64 tensor, as torchtune counts them


# ----------------------------------------------------------------------------- weight hooks


def hook_reads_the_share(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    share = [1.0]
    handles = [p.register_hook(lambda g: g * share[0]) for p in model.parameters()]  # one hook, share set per step
    n = len(batches)
    for i, (x, y) in enumerate(batches):
        share[0] = share_of(batches, i, accumulation_steps)
        loss_fn(model(x), y).backward()
        if (i + 1) % accumulation_steps == 0 or i + 1 == n:
            optimizer.step()
            optimizer.zero_grad()
    for h in handles:
        h.remove()


def hook_per_micro_step_removed(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    n = len(batches)
    for i, (x, y) in enumerate(batches):
        s = share_of(batches, i, accumulation_steps)
        handles = [p.register_hook(lambda g, s=s: g * s) for p in model.parameters()]
        loss_fn(model(x), y).backward()
        for h in handles:  # removed after its backward: one hook at a time
            h.remove()
        if (i + 1) % accumulation_steps == 0 or i + 1 == n:
            optimizer.step()
            optimizer.zero_grad()


def hook_divides_by_k(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    for p in model.parameters():
        p.register_hook(lambda g: g / accumulation_steps)  # 1/K for every micro-batch, short ones too
    n = len(batches)
    for i, (x, y) in enumerate(batches):
        loss_fn(model(x), y).backward()
        if (i + 1) % accumulation_steps == 0 or i + 1 == n:
            optimizer.step()
            optimizer.zero_grad()


def hook_registered_every_micro_step(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    n = len(batches)
    for i, (x, y) in enumerate(batches):
        for p in model.parameters():
            p.register_hook(lambda g: g / accumulation_steps)  # never removed: the hooks pile up
        loss_fn(model(x), y).backward()
        if (i + 1) % accumulation_steps == 0 or i + 1 == n:
            optimizer.step()
            optimizer.zero_grad()


def hook_and_loss_both_weigh(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    share = [1.0]
    for p in model.parameters():
        p.register_hook(lambda g: g * share[0])  # added by one hand ...
    n = len(batches)
    for i, (x, y) in enumerate(batches):
        share[0] = share_of(batches, i, accumulation_steps)
        loss = loss_fn(model(x), y) * share[0]  # ... and the loss weighed by another: the share twice
        loss.backward()
        if (i + 1) % accumulation_steps == 0 or i + 1 == n:
            optimizer.step()
            optimizer.zero_grad()


def hook_on_the_output(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    n = len(batches)
    for i, (x, y) in enumerate(batches):
        out, s = model(x), share_of(batches, i, accumulation_steps)
        out.register_hook(lambda g, s=s: g * s)  # weighs the gradient at the output, before it reaches the weights
        loss_fn(out, y).backward()
        if (i + 1) % accumulation_steps == 0 or i + 1 == n:
            optimizer.step()
            optimizer.zero_grad()


def hook_across_ranks(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None, *, comm):
    scale = [1.0]
    for p in model.parameters():
        p.register_hook(lambda g: g * scale[0])
    for start in range(0, len(batches), accumulation_steps):
        window = batches[start : start + accumulation_steps]
        tokens = comm.all_reduce(sum(real_tokens(y) for _, y in window))  # every rank's, before any backward
        scale[0] = comm.world_size / tokens.item()  # x world_size: DDP's mean over ranks divides by it
        for x, y in window:
            loss_fn(model(x), y, reduction="sum").backward()
        optimizer.step()
        optimizer.zero_grad()


def hook_per_rank_count(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None, *, comm):
    scale = [1.0]
    for p in model.parameters():
        p.register_hook(lambda g: g * scale[0])
    for start in range(0, len(batches), accumulation_steps):
        window = batches[start : start + accumulation_steps]
        scale[0] = comm.world_size / sum(real_tokens(y) for _, y in window).item()  # this rank's tokens only
        for x, y in window:
            loss_fn(model(x), y, reduction="sum").backward()
        optimizer.step()
        optimizer.zero_grad()


# ----------------------------------------------------------------------------- torch.func.grad


def func_grad_pile(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    def loss_at(params, x, y):
        return loss_fn(functional_call(model, params, (x,)), y)

    n, pile = len(batches), {}
    for i, (x, y) in enumerate(batches):
        params = {k: v.detach() for k, v in model.named_parameters()}
        for k, g in grad(loss_at)(params, x, y).items():
            pile[k] = pile.get(k, 0) + g * share_of(batches, i, accumulation_steps)  # each weighed by its share
        if (i + 1) % accumulation_steps == 0 or i + 1 == n:
            for k, p in model.named_parameters():
                p.grad = pile[k]
            optimizer.step()
            optimizer.zero_grad()
            pile = {}


def func_grad_per_example(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    def loss_of_one(params, x, y):
        return loss_fn(functional_call(model, params, (x.unsqueeze(0),)), y.unsqueeze(0))

    per_example = vmap(grad(loss_of_one), in_dims=(None, 0, 0))  # Opacus-shaped: one gradient per example
    for start in range(0, len(batches), accumulation_steps):
        window = batches[start : start + accumulation_steps]
        examples, pile = sum(len(y) for _, y in window), {}
        for x, y in window:
            params = {k: v.detach() for k, v in model.named_parameters()}
            for k, g in per_example(params, x, y).items():
                pile[k] = pile.get(k, 0) + g.sum(0) / examples  # every example of the window weighs 1/examples
        for k, p in model.named_parameters():
            p.grad = pile[k]
        optimizer.step()
        optimizer.zero_grad()


def func_grad_undivided(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    def loss_at(params, x, y):
        return loss_fn(functional_call(model, params, (x,)), y)

    n, pile = len(batches), {}
    for i, (x, y) in enumerate(batches):
        params = {k: v.detach() for k, v in model.named_parameters()}
        for k, g in grad(loss_at)(params, x, y).items():
            pile[k] = pile.get(k, 0) + g  # the mean losses' gradients summed, never divided
        if (i + 1) % accumulation_steps == 0 or i + 1 == n:
            for k, p in model.named_parameters():
                p.grad = pile[k]
            optimizer.step()
            optimizer.zero_grad()
            pile = {}


def func_grad_pile_kept(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    def loss_at(params, x, y):
        return loss_fn(functional_call(model, params, (x,)), y)

    n, pile = len(batches), {k: torch.zeros_like(p) for k, p in model.named_parameters()}
    for i, (x, y) in enumerate(batches):
        params = {k: v.detach() for k, v in model.named_parameters()}
        for k, g in grad(loss_at)(params, x, y).items():
            pile[k] += g * share_of(batches, i, accumulation_steps)
        if (i + 1) % accumulation_steps == 0 or i + 1 == n:
            for k, p in model.named_parameters():
                p.grad = pile[k].clone()
            optimizer.step()
            optimizer.zero_grad()  # .grad emptied; the pile, made once before the loop, never is


def func_grad_mean_of_means(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    def loss_at(params, x, y):
        return loss_fn(functional_call(model, params, (x,)), y)

    n, pile, count = len(batches), {}, 0
    for i, (x, y) in enumerate(batches):
        params = {k: v.detach() for k, v in model.named_parameters()}
        for k, g in grad(loss_at)(params, x, y).items():
            pile[k] = pile.get(k, 0) + g
        count += 1
        if (i + 1) % accumulation_steps == 0 or i + 1 == n:
            for k, p in model.named_parameters():
                p.grad = pile[k] / count  # every micro-batch's mean weighs the same, the short one too
            optimizer.step()
            optimizer.zero_grad()
            pile, count = {}, 0


def func_grad_across_ranks(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None, *, comm):
    def summed_loss(params, x, y):
        return loss_fn(functional_call(model, params, (x,)), y, reduction="sum")

    for start in range(0, len(batches), accumulation_steps):
        window, pile = batches[start : start + accumulation_steps], {}
        tokens = comm.all_reduce(sum(real_tokens(y) for _, y in window)).item()  # every rank's
        for x, y in window:
            params = {k: v.detach() for k, v in model.named_parameters()}
            for k, g in grad(summed_loss)(params, x, y).items():
                pile[k] = pile.get(k, 0) + g * comm.world_size / tokens  # DDP's mean over ranks divides it back
        for k, p in model.named_parameters():
            p.grad = pile[k]
        optimizer.step()
        optimizer.zero_grad()


def func_grad_per_rank_mean(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None, *, comm):
    def summed_loss(params, x, y):
        return loss_fn(functional_call(model, params, (x,)), y, reduction="sum")

    for start in range(0, len(batches), accumulation_steps):
        window, pile = batches[start : start + accumulation_steps], {}
        tokens = sum(real_tokens(y) for _, y in window).item()  # this rank's tokens only
        for x, y in window:
            params = {k: v.detach() for k, v in model.named_parameters()}
            for k, g in grad(summed_loss)(params, x, y).items():
                pile[k] = pile.get(k, 0) + g / tokens
        for k, p in model.named_parameters():
            p.grad = pile[k]
        optimizer.step()
        optimizer.zero_grad()


# ----------------------------------------------------------------------------- piles of torch.autograd.grad


def autograd_grad_pile(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    params, n, pile = list(model.parameters()), len(batches), None
    for i, (x, y) in enumerate(batches):
        grads = torch.autograd.grad(loss_fn(model(x), y) * share_of(batches, i, accumulation_steps), params)
        pile = list(grads) if pile is None else [a + g for a, g in zip(pile, grads)]
        if (i + 1) % accumulation_steps == 0 or i + 1 == n:
            for p, g in zip(params, pile):
                p.grad = g
            optimizer.step()
            optimizer.zero_grad()
            pile = None


def autograd_grad_keeps_last(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    params, n = list(model.parameters()), len(batches)
    for i, (x, y) in enumerate(batches):
        grads = torch.autograd.grad(loss_fn(model(x), y) * share_of(batches, i, accumulation_steps), params)
        pile = [g.clone() for g in grads]  # replaced each micro-step: only the last micro-batch reaches the step
        if (i + 1) % accumulation_steps == 0 or i + 1 == n:
            for p, g in zip(params, pile):
                p.grad = g
            optimizer.step()
            optimizer.zero_grad()


def autograd_grad_undivided(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    params, n, pile = list(model.parameters()), len(batches), None
    for i, (x, y) in enumerate(batches):
        grads = torch.autograd.grad(loss_fn(model(x), y), params)  # the mean loss, not weighed by its share
        pile = list(grads) if pile is None else [a + g for a, g in zip(pile, grads)]
        if (i + 1) % accumulation_steps == 0 or i + 1 == n:
            for p, g in zip(params, pile):
                p.grad = g
            optimizer.step()
            optimizer.zero_grad()
            pile = None


def autograd_grad_into_grad_never_zeroed(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    params, n = list(model.parameters()), len(batches)
    for i, (x, y) in enumerate(batches):
        grads = torch.autograd.grad(loss_fn(model(x), y) * share_of(batches, i, accumulation_steps), params)
        for p, g in zip(params, grads):
            p.grad = g if p.grad is None else p.grad + g  # piled in .grad by hand ...
        if (i + 1) % accumulation_steps == 0 or i + 1 == n:
            optimizer.step()  # ... and never emptied after the step


# ----------------------------------------------------------------------------- a loop's own buffer


def buffer_reset_after_step(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    params, n = list(model.parameters()), len(batches)
    buffer = [torch.zeros_like(p) for p in params]
    for i, (x, y) in enumerate(batches):
        (loss_fn(model(x), y) * share_of(batches, i, accumulation_steps)).backward()
        for b, p in zip(buffer, params):
            b += p.grad
        model.zero_grad()
        if (i + 1) % accumulation_steps == 0 or i + 1 == n:
            for b, p in zip(buffer, params):
                p.grad = b.clone()
            optimizer.step()
            optimizer.zero_grad()
            for b in buffer:
                b.zero_()  # emptied with the step


def buffer_foreach(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    params, n = list(model.parameters()), len(batches)
    buffer = [torch.zeros_like(p) for p in params]
    for i, (x, y) in enumerate(batches):
        (loss_fn(model(x), y) * share_of(batches, i, accumulation_steps)).backward()
        torch._foreach_add_(buffer, [p.grad for p in params])  # one fused add, as fused optimizers pile
        optimizer.zero_grad()
        if (i + 1) % accumulation_steps == 0 or i + 1 == n:
            for b, p in zip(buffer, params):
                p.grad = b.clone()
            optimizer.step()
            optimizer.zero_grad()
            torch._foreach_zero_(buffer)


def buffer_never_reset(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    params, n = list(model.parameters()), len(batches)
    buffer = [torch.zeros_like(p) for p in params]
    for i, (x, y) in enumerate(batches):
        (loss_fn(model(x), y) * share_of(batches, i, accumulation_steps)).backward()
        for b, p in zip(buffer, params):
            b += p.grad
        model.zero_grad()
        if (i + 1) % accumulation_steps == 0 or i + 1 == n:
            for b, p in zip(buffer, params):
                p.grad = b.clone()
            optimizer.step()
            optimizer.zero_grad()  # .grad emptied, the buffer not: every update carries the earlier ones


# ----------------------------------------------------------------------------- a right buffer, a wrong tail


def buffer_steps_on_full_windows(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    params = list(model.parameters())
    buffer = [torch.zeros_like(p) for p in params]
    for i, (x, y) in enumerate(batches):
        (loss_fn(model(x), y) * share_of(batches, i, accumulation_steps)).backward()
        for b, p in zip(buffer, params):
            b += p.grad
        model.zero_grad()
        if (i + 1) % accumulation_steps == 0:  # no `or i + 1 == len(batches)`: a short last window never steps
            for b, p in zip(buffer, params):
                p.grad = b.clone()
            optimizer.step()
            optimizer.zero_grad()
            for b in buffer:
                b.zero_()


def buffer_over_full_windows(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    params, K = list(model.parameters()), accumulation_steps
    for start in range(0, len(batches) - K + 1, K):  # whole windows only: a short last one is never read
        buffer = [torch.zeros_like(p) for p in params]
        for i in range(start, start + K):
            x, y = batches[i]
            (loss_fn(model(x), y) * share_of(batches, i, K)).backward()
            for b, p in zip(buffer, params):
                b += p.grad
            model.zero_grad()
        for b, p in zip(buffer, params):
            p.grad = b
        optimizer.step()
        optimizer.zero_grad()


def buffer_divided_by_k(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    params, n = list(model.parameters()), len(batches)
    buffer = [torch.zeros_like(p) for p in params]
    for i, (x, y) in enumerate(batches):
        loss_fn(model(x), y).backward()
        for b, p in zip(buffer, params):
            b += p.grad
        model.zero_grad()
        if (i + 1) % accumulation_steps == 0 or i + 1 == n:
            for b, p in zip(buffer, params):
                p.grad = b / accumulation_steps  # / K whatever the window holds
            optimizer.step()
            optimizer.zero_grad()
            for b in buffer:
                b.zero_()


# ----------------------------------------------------------------------------- a running mean in .grad


def running_mean_by_examples(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    n, seen = len(batches), 0
    for i, (x, y) in enumerate(batches):
        seen += len(y)
        for p in model.parameters():
            if p.grad is not None:
                p.grad.mul_((seen - len(y)) / seen)  # the mean so far, re-weighed for the examples to come
        (loss_fn(model(x), y) * len(y) / seen).backward()
        if (i + 1) % accumulation_steps == 0 or i + 1 == n:
            optimizer.step()
            optimizer.zero_grad()
            seen = 0


def running_mean_by_examples_foreach(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    n, seen = len(batches), 0
    for i, (x, y) in enumerate(batches):
        seen += len(y)
        grads = [p.grad for p in model.parameters() if p.grad is not None]
        if grads:
            torch._foreach_mul_(grads, (seen - len(y)) / seen)  # clip_grad_norm_'s op, and no clip: a mean
        (loss_fn(model(x), y) * len(y) / seen).backward()
        if (i + 1) % accumulation_steps == 0 or i + 1 == n:
            optimizer.step()
            optimizer.zero_grad()
            seen = 0


def running_mean_by_micro_batches(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    n = len(batches)
    for i, (x, y) in enumerate(batches):
        j = i % accumulation_steps + 1
        for p in model.parameters():
            if p.grad is not None:
                p.grad.mul_((j - 1) / j)  # a mean over micro-batches: the short one weighs as much as a full one
        (loss_fn(model(x), y) / j).backward()
        if (i + 1) % accumulation_steps == 0 or i + 1 == n:
            optimizer.step()
            optimizer.zero_grad()


def running_mean_foreach(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    n = len(batches)
    for i, (x, y) in enumerate(batches):
        j = i % accumulation_steps + 1
        grads = [p.grad for p in model.parameters() if p.grad is not None]
        if grads:
            torch._foreach_mul_(grads, (j - 1) / j)  # the op clip_grad_norm_ scales with; a mean over micro-batches
        (loss_fn(model(x), y) / j).backward()
        if (i + 1) % accumulation_steps == 0 or i + 1 == n:
            optimizer.step()
            optimizer.zero_grad()


# ----------------------------------------------------------------------------- a compiled model


def compiled_eager(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    compiled = torch.compile(model, backend="eager")  # the same parameters, a traced forward
    n = len(batches)
    for i, (x, y) in enumerate(batches):
        (loss_fn(compiled(x), y) * share_of(batches, i, accumulation_steps)).backward()
        if (i + 1) % accumulation_steps == 0 or i + 1 == n:
            optimizer.step()
            optimizer.zero_grad()


def module_compiled_in_place(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    model.compile(backend="eager")  # nn.Module.compile: the module's own call, its hooks too, is traced
    n = len(batches)
    for i, (x, y) in enumerate(batches):
        (loss_fn(model(x), y) * share_of(batches, i, accumulation_steps)).backward()
        if (i + 1) % accumulation_steps == 0 or i + 1 == n:
            optimizer.step()
            optimizer.zero_grad()


def compiled_eager_undivided(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    compiled = torch.compile(model, backend="eager")
    n = len(batches)
    for i, (x, y) in enumerate(batches):
        loss_fn(compiled(x), y).backward()  # every micro-batch's mean loss undivided
        if (i + 1) % accumulation_steps == 0 or i + 1 == n:
            optimizer.step()
            optimizer.zero_grad()


def compiled_inductor(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    compiled = torch.compile(model, backend="inductor")  # C++ kernels built on this CPU: seconds at first call
    n = len(batches)
    for i, (x, y) in enumerate(batches):
        (loss_fn(compiled(x), y) * share_of(batches, i, accumulation_steps)).backward()
        if (i + 1) % accumulation_steps == 0 or i + 1 == n:
            optimizer.step()
            optimizer.zero_grad()


# ----------------------------------------------------------------------------- torchtune's scale_grads


def scale_grads(model, scaler):  # torchtune.training.scale_grads
    for p in model.parameters():
        if p.grad is not None:
            p.grad *= scaler


def torchtune_scale_grads(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    n, num_tokens = len(batches), 0
    for i, (x, labels) in enumerate(batches):
        current = real_tokens(labels)
        num_tokens += current
        (loss_fn(model(x), labels) * current).backward()  # the micro-batch's summed token loss
        if (i + 1) % accumulation_steps == 0 or i + 1 == n:
            scale_grads(model, 1 / num_tokens)  # a float32 tensor: right to float32's rounding
            optimizer.step()
            optimizer.zero_grad()
            num_tokens = 0


def share_as_a_float32_tensor(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    n = len(batches)
    for i, (x, y) in enumerate(batches):
        share = torch.tensor(share_of(batches, i, accumulation_steps))  # the default dtype: float32
        (loss_fn(model(x), y) * share).backward()  # a float64 loss times the share rounded to float32
        if (i + 1) % accumulation_steps == 0 or i + 1 == n:
            optimizer.step()
            optimizer.zero_grad()


def torchtune_counts_padding(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    n, num_tokens = len(batches), 0
    for i, (x, labels) in enumerate(batches):
        num_tokens += labels.numel()  # every position, the padding too
        (loss_fn(model(x), labels) * real_tokens(labels)).backward()
        if (i + 1) % accumulation_steps == 0 or i + 1 == n:
            scale_grads(model, 1 / num_tokens)
            optimizer.step()
            optimizer.zero_grad()
            num_tokens = 0


def torchtune_across_ranks(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None, *, comm):
    n, num_tokens = len(batches), 0
    for i, (x, labels) in enumerate(batches):
        current = real_tokens(labels)
        num_tokens += current
        (loss_fn(model(x), labels) * current).backward()
        if (i + 1) % accumulation_steps == 0 or i + 1 == n:
            comm.all_reduce(num_tokens)  # every rank's tokens
            scale_grads(model, comm.world_size / num_tokens)  # x world_size: DDP's mean over ranks divides by it
            optimizer.step()
            optimizer.zero_grad()
            num_tokens = 0


def torchtune_ranks_divide_twice(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None, *, comm):
    n, num_tokens = len(batches), 0
    for i, (x, labels) in enumerate(batches):
        current = real_tokens(labels)
        num_tokens += current
        (loss_fn(model(x), labels) * current).backward()
        if (i + 1) % accumulation_steps == 0 or i + 1 == n:
            comm.all_reduce(num_tokens)
            scale_grads(model, 1 / num_tokens)  # and DDP's mean over ranks divides again by world_size
            optimizer.step()
            optimizer.zero_grad()
            num_tokens = 0


def torchtune_rank_local_count(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None, *, comm):
    n, num_tokens = len(batches), 0
    for i, (x, labels) in enumerate(batches):
        current = real_tokens(labels)
        num_tokens += current
        (loss_fn(model(x), labels) * current).backward()
        if (i + 1) % accumulation_steps == 0 or i + 1 == n:
            scale_grads(model, 1 / num_tokens)  # this rank's tokens only: a token weighs more on a short rank
            optimizer.step()
            optimizer.zero_grad()
            num_tokens = 0


# ----------------------------------------------------------------------------- two forwards, one backward (R-Drop)


def rdrop_halved(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    n = len(batches)
    for i, (x, y) in enumerate(batches):
        out1, out2 = model(x), model(x)  # two forwards of one micro-batch (dropout would make them differ)
        loss = (loss_fn(out1, y) + loss_fn(out2, y)) / 2 + 0.5 * (out1 - out2).pow(2).mean()  # halved: one loss
        (loss * share_of(batches, i, accumulation_steps)).backward()
        if (i + 1) % accumulation_steps == 0 or i + 1 == n:
            optimizer.step()
            optimizer.zero_grad()


def rdrop_two_backwards(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    n = len(batches)
    for i, (x, y) in enumerate(batches):
        share = share_of(batches, i, accumulation_steps)
        for _ in range(2):  # two forwards, each half the micro-batch's weight, each with its own backward
            (loss_fn(model(x), y) * share / 2).backward()
        if (i + 1) % accumulation_steps == 0 or i + 1 == n:
            optimizer.step()
            optimizer.zero_grad()


def rdrop_summed(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    n = len(batches)
    for i, (x, y) in enumerate(batches):
        out1, out2 = model(x), model(x)
        loss = loss_fn(out1, y) + loss_fn(out2, y) + 0.5 * (out1 - out2).pow(2).mean()  # two losses, not halved
        (loss * share_of(batches, i, accumulation_steps)).backward()
        if (i + 1) % accumulation_steps == 0 or i + 1 == n:
            optimizer.step()
            optimizer.zero_grad()


# ----------------------------------------------------------------------------- graphs kept, outputs kept


def keeps_outputs_for_a_metric(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    n, outputs = len(batches), []
    for i, (x, y) in enumerate(batches):
        out = model(x)
        (loss_fn(out, y) * share_of(batches, i, accumulation_steps)).backward()
        outputs.append((out, y))  # kept after backward: its graph's saved tensors are already freed
        if (i + 1) % accumulation_steps == 0 or i + 1 == n:
            optimizer.step()
            optimizer.zero_grad()
            with torch.no_grad():
                _error = max(float((o - t).abs().max()) for o, t in outputs)  # the window's worst error
            outputs = []


def sums_the_window_then_backward(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    n, total = len(batches), 0
    for i, (x, y) in enumerate(batches):
        total = total + loss_fn(model(x), y) * share_of(batches, i, accumulation_steps)  # every graph kept to here
        if (i + 1) % accumulation_steps == 0 or i + 1 == n:
            total.backward()
            optimizer.step()
            optimizer.zero_grad()
            total = 0


# ----------------------------------------------------------------------------- what a report says


def logs_each_update(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    n, logged, update_loss = len(batches), [], 0.0
    for i, (x, y) in enumerate(batches):
        loss = loss_fn(model(x), y) * share_of(batches, i, accumulation_steps)
        loss.backward()
        update_loss += loss.item()  # the update's mean loss, each micro-batch weighed by its share
        if (i + 1) % accumulation_steps == 0 or i + 1 == n:
            optimizer.step()
            optimizer.zero_grad()
            logged.append(update_loss)
            update_loss = 0.0
    return logged


def logs_every_micro_batch(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    n, logged = len(batches), []
    for i, (x, y) in enumerate(batches):
        loss = loss_fn(model(x), y)
        logged.append(loss.item())  # one value per micro-batch, not per update
        (loss * share_of(batches, i, accumulation_steps)).backward()
        if (i + 1) % accumulation_steps == 0 or i + 1 == n:
            optimizer.step()
            optimizer.zero_grad()
    return logged


def nanogpt_whole_windows(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    it = iter(batches)
    for _ in range(len(batches) // accumulation_steps):  # whole windows: a short last window is never read
        window = [next(it) for _ in range(accumulation_steps)]
        examples = sum(len(y) for _, y in window)
        for x, y in window:
            (loss_fn(model(x), y) * len(y) / examples).backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)


def steps_again_on_an_emptied_pile(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    n = len(batches)
    for i, (x, y) in enumerate(batches):
        (loss_fn(model(x), y) * share_of(batches, i, accumulation_steps)).backward()
        if (i + 1) % accumulation_steps == 0 or i + 1 == n:
            optimizer.step()
            optimizer.zero_grad(set_to_none=False)  # the pile emptied to zeros ...
            optimizer.step()  # ... and stepped again: nothing under plain SGD, a step on zeros with momentum or Adam


def steps_again_with_no_pile(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    n = len(batches)
    for i, (x, y) in enumerate(batches):
        (loss_fn(model(x), y) * share_of(batches, i, accumulation_steps)).backward()
        if (i + 1) % accumulation_steps == 0 or i + 1 == n:
            optimizer.step()
            optimizer.zero_grad()  # .grad set to None ...
            optimizer.step()  # ... so this step skips every weight, with any optimizer


def loss_rebuilt_from_item(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    n = len(batches)
    for i, (x, y) in enumerate(batches):
        value = loss_fn(model(x), y).item() * share_of(batches, i, accumulation_steps)
        torch.tensor(value, requires_grad=True).backward()  # backward() runs, on a new leaf: no weight gets a gradient
        if (i + 1) % accumulation_steps == 0 or i + 1 == n:
            optimizer.step()
            optimizer.zero_grad()


def clips_the_norm_once(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    n = len(batches)
    for i, (x, y) in enumerate(batches):
        (loss_fn(model(x), y) * share_of(batches, i, accumulation_steps)).backward()
        if (i + 1) % accumulation_steps == 0 or i + 1 == n:
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            optimizer.zero_grad()


def clips_by_value(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    n = len(batches)
    for i, (x, y) in enumerate(batches):
        (loss_fn(model(x), y) * share_of(batches, i, accumulation_steps)).backward()
        if (i + 1) % accumulation_steps == 0 or i + 1 == n:
            torch.nn.utils.clip_grad_value_(model.parameters(), 1.0)  # each entry to [-1, 1]: not the norm's clip
            optimizer.step()
            optimizer.zero_grad()


def producer_thread_until_sentinel(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    q = queue.Queue(maxsize=2)

    def produce():
        for item in enumerate(batches):
            q.put(item)
        q.put(None)  # the end, said by the producer

    producer = threading.Thread(target=produce, daemon=True)
    producer.start()
    n = len(batches)
    while (item := q.get()) is not None:
        i, (x, y) = item
        (loss_fn(model(x), y) * share_of(batches, i, accumulation_steps)).backward()
        if (i + 1) % accumulation_steps == 0 or i + 1 == n:
            optimizer.step()
            optimizer.zero_grad()
    producer.join()


def producer_thread_k_per_window(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    q = queue.Queue(maxsize=2)
    threading.Thread(target=lambda: [q.put(item) for item in enumerate(batches)], daemon=True).start()
    for _ in range(-(-len(batches) // accumulation_steps)):
        for _ in range(accumulation_steps):  # K gets even in a short last window: q.get() then waits for ever
            i, (x, y) = q.get()
            (loss_fn(model(x), y) * share_of(batches, i, accumulation_steps)).backward()
        optimizer.step()
        optimizer.zero_grad()


def probes_the_gradient_norm(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    params, n, norms = list(model.parameters()), len(batches), []
    for i, (x, y) in enumerate(batches):
        loss = loss_fn(model(x), y) * share_of(batches, i, accumulation_steps)
        probe = torch.autograd.grad(loss, params, retain_graph=True)  # a metric only: .grad is left alone
        norms.append(float(torch.cat([g.reshape(-1) for g in probe]).norm()))
        loss.backward()
        if (i + 1) % accumulation_steps == 0 or i + 1 == n:
            optimizer.step()
            optimizer.zero_grad()


LOOPS: list[Case] = [
    # weight hooks
    Case("hook_reads_the_share", "weight_hook", hook_reads_the_share, True, frozenset(),
         "one hook per weight multiplies each micro-batch's gradient by its share n_i/n"),
    Case("hook_per_micro_step_removed", "weight_hook", hook_per_micro_step_removed, True, frozenset(),
         "a hook per micro-step, removed after its backward, weighs that micro-batch by its share"),
    Case("hook_on_the_output", "weight_hook", hook_on_the_output, True, frozenset(),
         "a hook on the model's output multiplies the gradient flowing back by the micro-batch's share"),
    Case("hook_divides_by_k", "weight_hook", hook_divides_by_k, False,
         frozenset({"tail_divided_by_k", "normalised_per_micro_batch"}),
         "the hook divides every micro-batch's gradient by K, so the short last micro-batch weighs as a full one"),
    Case("hook_registered_every_micro_step", "weight_hook", hook_registered_every_micro_step, False, None,
         "a new hook each micro-step is never removed, so micro-batch i's gradient is divided by K i + 1 times"),
    Case("hook_and_loss_both_weigh", "weight_hook", hook_and_loss_both_weigh, False,
         frozenset({"loss_divided_twice"}),
         "the hook and the loss both multiply by the share, so each gradient is weighed by its share squared"),
    Case("hook_across_ranks", "weight_hook", hook_across_ranks, True, frozenset(),
         "the hook scales each rank's summed token loss by world_size / every rank's tokens, counted before backward",
         settings=ACROSS_RANKS, problem="tokens"),
    Case("hook_per_rank_count", "weight_hook", hook_per_rank_count, False, frozenset({"per_rank_normaliser"}),
         "the hook divides by this rank's tokens only, so a token on a rank with few weighs more",
         settings=ACROSS_RANKS, problem="tokens"),
    # torch.func.grad
    Case("func_grad_pile", "func_grad", func_grad_pile, True, frozenset(),
         "torch.func.grad's gradients, each weighed by its share, are piled and put in .grad before the step"),
    Case("func_grad_per_example", "func_grad", func_grad_per_example, True, frozenset(),
         "vmap(grad) gives one gradient per example; each is divided by the window's examples and summed"),
    Case("func_grad_undivided", "func_grad", func_grad_undivided, False, frozenset({"loss_not_divided"}),
         "the mean losses' gradients are summed undivided, so an update of n micro-batches is about n x too big"),
    Case("func_grad_pile_kept", "func_grad", func_grad_pile_kept, False, frozenset({"zero_grad_missing"}),
         "the pile is made once and never emptied, so each update adds every earlier update's gradient",
         never_says=("call zero_grad()",)),
    Case("func_grad_mean_of_means", "func_grad", func_grad_mean_of_means, False,
         frozenset({"normalised_per_micro_batch", "tail_divided_by_k"}),
         "the pile is divided by the micro-batches counted, so the short last micro-batch weighs as a full one",
         settings=MIXED_LAST_WINDOW),
    Case("func_grad_mean_of_means_alone", "func_grad", func_grad_mean_of_means, True, frozenset(),
         "where the short micro-batch is alone in its window, the mean over micro-batches is the mean over examples",
         settings=ALONE_LAST),
    # torch.autograd.grad
    Case("func_grad_across_ranks", "func_grad", func_grad_across_ranks, True, frozenset(),
         "torch.func.grad of each summed token loss, scaled by world_size / every rank's tokens, then DDP's mean",
         settings=ACROSS_RANKS, problem="tokens"),
    Case("func_grad_per_rank_mean", "func_grad", func_grad_per_rank_mean, False, frozenset({"per_rank_normaliser"}),
         "each rank divides its pile by its own tokens, so a token on a rank with few weighs more",
         settings=ACROSS_RANKS, problem="tokens"),
    Case("autograd_grad_pile", "autograd_grad", autograd_grad_pile, True, frozenset(),
         "torch.autograd.grad of each weighed loss is summed and put in .grad before the step"),
    Case("autograd_grad_keeps_last", "autograd_grad", autograd_grad_keeps_last, False,
         frozenset({"zero_grad_every_micro_step"}),
         "the pile is replaced each micro-step, so each step uses only its window's last micro-batch"),
    Case("autograd_grad_undivided", "autograd_grad", autograd_grad_undivided, False, frozenset({"loss_not_divided"}),
         "the mean losses' gradients are summed undivided, so an update of n micro-batches is about n x too big"),
    # a private buffer
    Case("autograd_grad_into_grad_never_zeroed", "autograd_grad", autograd_grad_into_grad_never_zeroed, False,
         frozenset({"zero_grad_missing"}), "autograd.grad's results are added into .grad, which is never emptied"),
    Case("buffer_reset_after_step", "own_buffer", buffer_reset_after_step, True, frozenset(),
         "the loop piles .grad into its own buffer, puts it back for the step, and empties it after"),
    Case("buffer_foreach", "own_buffer", buffer_foreach, True, frozenset(),
         "the buffer piled with torch._foreach_add_, put back in .grad for the step and zeroed after"),
    Case("buffer_never_reset", "own_buffer", buffer_never_reset, False, frozenset({"zero_grad_missing"}),
         "the buffer is never emptied, so each update adds every earlier update's gradient",
         never_says=("call zero_grad()",)),
    # a right buffer with a wrong tail
    Case("buffer_steps_on_full_windows", "buffer_tail", buffer_steps_on_full_windows, False,
         frozenset({"forget_final_step"}),
         "the short last window goes through backward() into the buffer but never reaches a step",
         settings=WITH_TAIL),
    Case("buffer_steps_on_full_windows_no_tail", "buffer_tail", buffer_steps_on_full_windows, True, frozenset(),
         "without an uneven tail every window is whole, so every window steps", settings=NO_TAIL),
    Case("buffer_over_full_windows", "buffer_tail", buffer_over_full_windows, False, frozenset({"tail_dropped"}),
         "the loop reads whole windows only, so the short last window never goes through backward()",
         settings=WITH_TAIL),
    Case("buffer_over_full_windows_no_tail", "buffer_tail", buffer_over_full_windows, True, frozenset(),
         "without an uneven tail every window is whole, so every micro-batch is read", settings=NO_TAIL),
    Case("buffer_divided_by_k", "buffer_tail", buffer_divided_by_k, False,
         frozenset({"tail_divided_by_k", "normalised_per_micro_batch"}),
         "the buffer is divided by K at every step, so a short micro-batch or window is weighed as a full one"),
    # a running mean in .grad
    Case("running_mean_by_examples", "running_mean", running_mean_by_examples, True, frozenset(),
         ".grad is rescaled inside the window to the mean over the examples seen so far, which ends at the window's"),
    Case("running_mean_by_examples_foreach", "running_mean", running_mean_by_examples_foreach, True, frozenset(),
         "the running mean over examples, rescaled with torch._foreach_mul_ (clip_grad_norm_'s op): nothing clipped"),
    Case("running_mean_by_micro_batches", "running_mean", running_mean_by_micro_batches, False,
         frozenset({"normalised_per_micro_batch", "tail_divided_by_k"}),
         "the running mean counts micro-batches, not examples, so the short last micro-batch weighs as a full one; "
         "nothing is clipped", settings=MIXED_LAST_WINDOW, never_says=("clipping runs", "clip once")),
    Case("running_mean_foreach", "running_mean", running_mean_foreach, False,
         frozenset({"normalised_per_micro_batch", "tail_divided_by_k"}),
         "a mean over micro-batches rescaled with torch._foreach_mul_, the op clip_grad_norm_ uses; nothing is clipped",
         settings=MIXED_LAST_WINDOW, never_says=("clipping runs", "clip once")),
    Case("running_mean_by_micro_batches_alone", "running_mean", running_mean_by_micro_batches, True, frozenset(),
         "where the short micro-batch is alone in its window, the mean over micro-batches is the mean over examples",
         settings=ALONE_LAST),
    # a compiled model
    Case("compiled_eager", "compiled", compiled_eager, True, frozenset(),
         "torch.compile with the eager backend runs the same forward; each loss is weighed by its share"),
    Case("module_compiled_in_place", "compiled", module_compiled_in_place, True, frozenset(),
         "nn.Module.compile(backend='eager') traces the module's own call; each loss is weighed by its share"),
    Case("compiled_eager_undivided", "compiled", compiled_eager_undivided, False, frozenset({"loss_not_divided"}),
         "around a compiled model, each micro-batch's mean loss reaches backward() undivided"),
    Case("compiled_inductor", "compiled", compiled_inductor, True, frozenset(),
         "torch.compile with inductor computes the same gradients to float64 rounding; each loss weighed by its share",
         rtol=1e-9),
    # a float32 scale factor
    Case("torchtune_scale_grads", "float32_factor", torchtune_scale_grads, True, frozenset(),
         "the summed token losses divided by the window's real tokens, the factor 1/num_tokens rounded to float32",
         problem="tokens", rtol=1e-6, never_says=("differs",)),
    Case("share_as_a_float32_tensor", "float32_factor", share_as_a_float32_tensor, True, frozenset(),
         "each loss weighed by its share, the share a float32 tensor: right to float32's rounding", rtol=1e-6,
         never_says=("differs",)),
    Case("torchtune_counts_padding", "float32_factor", torchtune_counts_padding, False,
         frozenset({"padding_counted"}), "the window's positions, padding included, divide the summed token losses",
         problem="tokens"),
    Case("torchtune_across_ranks", "float32_factor", torchtune_across_ranks, True, frozenset(),
         "every rank's tokens all-reduced, each rank's sum scaled by world_size / them, DDP's mean over ranks after",
         settings=ACROSS_RANKS, problem="tokens", rtol=1e-6, never_says=("differs",)),
    Case("torchtune_ranks_divide_twice", "float32_factor", torchtune_ranks_divide_twice, False,
         frozenset({"ranks_divided_twice"}),
         "scaled by 1 / all ranks' tokens, then DDP's mean divides by world_size again",
         settings=ACROSS_RANKS, problem="tokens"),
    Case("torchtune_rank_local_count", "float32_factor", torchtune_rank_local_count, False,
         frozenset({"per_rank_normaliser"}),
         "each rank divides by its own tokens, so a token on a rank with few weighs more",
         settings=ACROSS_RANKS, problem="tokens"),
    # two forwards, one backward
    Case("rdrop_halved", "rdrop", rdrop_halved, True, frozenset(),
         "two forwards of one micro-batch, their losses halved (the consistency term has no gradient when they agree); "
         "one backward each: memory does not grow with K",
         never_says=("memory grows with k",)),
    Case("rdrop_two_backwards", "rdrop", rdrop_two_backwards, True, frozenset(),
         "two forwards of one micro-batch, each half its weight and backpropagated on its own: 2 backward passes "
         "a micro-batch, the same pile"),
    Case("rdrop_summed", "rdrop", rdrop_summed, False, frozenset({"wrong_loss_scale"}),
         "the two forwards' losses are summed, not halved, so every update is 2 x too big"),
    # graphs and outputs
    Case("keeps_outputs_for_a_metric", "graphs", keeps_outputs_for_a_metric, True, frozenset(),
         "outputs kept after their backward for a metric hold no saved tensors: memory does not grow with K",
         never_says=("memory grows with k",)),
    Case("sums_the_window_then_backward", "graphs", sums_the_window_then_backward, False,
         frozenset({"graphs_kept_alive"}),
         "the window's losses are summed and backpropagated once: the updates are right, but K graphs are alive",
         shows=MEMORY),
    # what a report says
    Case("logs_each_update", "reports", logs_each_update, True, frozenset(),
         "it returns one mean loss per update, each micro-batch weighed by its share"),
    Case("logs_every_micro_batch", "reports", logs_every_micro_batch, False, frozenset({"log_wrong"}),
         "it returns one value per micro-batch (N values for ceil(N/K) updates); the updates are right", shows=LOG),
    Case("nanogpt_whole_windows", "reports", nanogpt_whole_windows, False, frozenset({"tail_dropped"}),
         "it makes 2 updates where the big batch makes 3: the short last window is never read", settings=WITH_TAIL),
    Case("nanogpt_whole_windows_no_tail", "reports", nanogpt_whole_windows, True, frozenset(),
         "without an uneven tail every window is whole, each weighed by its examples", settings=NO_TAIL),
    Case("steps_again_on_an_emptied_pile", "reports", steps_again_on_an_emptied_pile, False,
         frozenset({"step_twice"}),
         "a second step on a pile emptied to zeros moves nothing under plain SGD; with momentum or Adam it moves again",
         shows=MOMENTUM, never_says=("applies the update again",)),
    Case("steps_again_with_no_pile", "reports", steps_again_with_no_pile, True, frozenset(),
         "a second step after zero_grad() finds .grad None and moves nothing under any optimizer: the updates are "
         "the big batch's", never_says=("applies the update again",)),
    Case("loss_rebuilt_from_item", "reports", loss_rebuilt_from_item, False, frozenset({"never_calls_backward"}),
         "backward() runs on a tensor rebuilt from .item(), so no gradient reaches the weights",
         never_says=("call loss.backward()",)),
    Case("clips_the_norm_once", "reports", clips_the_norm_once, True, frozenset(),
         "clip_grad_norm_ once per update, before the step, at the audit's clip_norm", clip_norm=1.0),
    Case("clips_by_value", "reports", clips_by_value, False, None,
         "clip_grad_value_ clips each entry, not the norm: the fix is clip_grad_norm_ once before the step",
         clip_norm=1.0, never_says=("leave .grad alone",)),
    Case("producer_thread_until_sentinel", "reports", producer_thread_until_sentinel, True, frozenset(),
         "a producer thread feeds the micro-batches through a queue and ends it with None"),
    Case("producer_thread_k_per_window", "reports", producer_thread_k_per_window, False, frozenset({"time_limit"}),
         "it asks for K micro-batches in the short last window, so its q.get() waits for ever", settings=WITH_TAIL,
         shows=HANGS, never_says=("threading.py",)),
    Case("producer_thread_k_per_window_no_tail", "reports", producer_thread_k_per_window, True, frozenset(),
         "without an uneven tail every window holds K micro-batches", settings=NO_TAIL),
    Case("probes_the_gradient_norm", "reports", probes_the_gradient_norm, True, frozenset(),
         "torch.autograd.grad probes the gradient for a metric only; .grad comes from one backward per micro-batch"),
]
