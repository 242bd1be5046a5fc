"""Researcher notebook 7 (shards and stages): function answers judged on cases of their own, named by their mistake."""
from __future__ import annotations

from typing import Callable

import torch

from widgets.exercises.toolkit import Exercise, ExerciseSet, Feedback, as_number, close_to, correct, incorrect
from widgets.exercises.toolkit import is_placeholder, not_attempted
from widgets.lessons.researcher_7.pipeline import bubble_formula, make_mlp, split_model
from widgets.lessons.researcher_7.window import window_gradient
from widgets.research.planner import zero_bytes_per_rank

BUBBLE_CASES = [(1, 1), (2, 1), (2, 8), (4, 4), (4, 16), (8, 3), (5, 32), (16, 64)]  # (stages p, micro-batches m)
BUBBLE_MISTAKES: dict[str, Callable[[int, int], float]] = {
    "(p - 1) / m is the idle time over the busy time, not over the whole run: divide by m + p - 1 slots":
        lambda p, m: (p - 1) / m,
    "(p - 1) / p is the bubble of a single micro-batch (m = 1); with m micro-batches the run is m + p - 1 slots":
        lambda p, m: (p - 1) / p,
    "the run lasts m + p - 1 slots per stage, not m + p: the last micro-batch enters after m - 1, and the pipe "
    "takes p to drain": lambda p, m: (p - 1) / (m + p),
    "that is the busy share, m / (m + p - 1); the bubble is what is left of it": lambda p, m: m / (m + p - 1),
}


def _check_bubble(answer: object) -> Feedback:
    if is_placeholder(answer(2, 8)):  # the body is still `...`
        return not_attempted("fill in the body of `bubble_fraction`, then run the cell again")
    for p, m in BUBBLE_CASES:
        value = as_number(answer(p, m), f"bubble_fraction({p}, {m})")
        if close_to(value, bubble_formula(p, m)):
            continue
        if all(close_to(as_number(answer(q, n)), value) for q, n in BUBBLE_CASES[1:]):
            return incorrect(f"your function returns {value:g} whatever p and m are: it must compute the fraction "
                             "from its arguments, not give one example's answer")
        for message, mistake in BUBBLE_MISTAKES.items():
            if all(close_to(as_number(answer(q, n)), mistake(q, n)) for q, n in BUBBLE_CASES):
                return incorrect(message + ".")
        return incorrect(f"your bubble_fraction({p}, {m}) gave {value:g}; with p = {p} stages and m = {m} micro-batches "
                         f"the grid shows {bubble_formula(p, m):.4g}")
    return correct("(p - 1) / (m + p - 1) on every (p, m) tried: the p - 1 slots to fill and drain the pipe, over "
                   "the m + p - 1 slots a stage's forwards span. It shrinks only as m grows.")


def bubble_fraction(stages: int, micro_batches: int) -> float:
    """Worked answer: p - 1 idle slots of the m + p - 1 a stage's forwards (and backwards) span."""
    return (stages - 1) / (micro_batches + stages - 1)


ZERO_CASES = [(7_000_000_000, s, 8) for s in range(4)] + [(1_000_000, 2, 4), (1_000_000, 3, 1), (3_000, 1, 16),
                                                          (10_000_000, 3, 64)]


def _zero_mistakes(parameters: int, stage: int, world_size: int) -> dict[str, float]:
    p, n = parameters, world_size
    shard = -(-p // n)
    weights = 2 * (shard if stage >= 3 else p)
    grads = 2 * (shard if stage >= 2 else p)
    optimizer = 12 * (shard if stage >= 1 else p)
    return {
        "stage 2 shards the gradients too (2 bytes each, over N ranks), not only the optimizer state":
            weights + (2 * p if stage == 2 else grads) + optimizer,
        "stage 1 shards only the optimizer state: the gradients stay whole on every rank until stage 2":
            weights + 2 * (shard if stage >= 1 else p) + optimizer,
        "stage 3 also shards the 16-bit weights (FSDP FULL_SHARD): 2 P / N": 2 * p + grads + optimizer,
        "the gradients here are 16-bit, 2 bytes each (grad_bytes = 2), not 4":
            weights + 4 * (shard if stage >= 2 else p) + optimizer,
        "Adam's fp32 state is 12 bytes per parameter: master weights, momentum and variance, 4 each":
            weights + grads + 8 * (shard if stage >= 1 else p),
        "the optimizer state is missing: mixed-precision Adam keeps 12 bytes per parameter besides the weights "
        "and gradients": weights + grads,
    }


def _check_zero(answer: object) -> Feedback:
    if is_placeholder(answer(1_000, 1, 2)):  # the body is still `...`
        return not_attempted("fill in the body of `bytes_per_rank`, then run the cell again")
    for p, stage, n in ZERO_CASES:
        value = as_number(answer(p, stage, n), f"bytes_per_rank({p}, {stage}, {n})")
        expected = zero_bytes_per_rank(p, stage, n, grad_bytes=2)["total"]
        if close_to(value, expected, rel=1e-6):
            continue
        if all(close_to(as_number(answer(*case)), value) for case in ZERO_CASES[1:]):
            return incorrect(f"your function returns {value:g} whatever the model, stage and ranks: compute it "
                             "from its arguments")
        for message, mistaken in _zero_mistakes(p, stage, n).items():
            if close_to(value, mistaken, rel=1e-6):
                return incorrect(f"your bytes_per_rank({p:_}, {stage}, {n}) gave {value:.4g}. {message[:1].upper()}"
                                 f"{message[1:]}.")
        return incorrect(f"your bytes_per_rank({p:_}, {stage}, {n}) gave {value:.4g}; it should be {expected:.4g} "
                         "(2P weights, 2P gradients, 12P optimizer state, each sharded from its stage on)")
    return correct("stage 1 shards the 12 P of optimizer state, stage 2 the gradients too, stage 3 the weights as "
                   "well: 16 P / N in all. Under FSDP's no_sync the gradients stay whole (2 P, 4 P in float32) until "
                   "the last micro-step; DeepSpeed's ZeRO-2 and ZeRO-3 refuse no_sync and reduce at every micro-step.")


def bytes_per_rank(parameters: int, stage: int, world_size: int) -> float:
    """Worked answer: mixed-precision Adam under ZeRO; a shard is ceil(P / N) parameters."""
    shard = -(-parameters // world_size)
    weights = 2 * (shard if stage >= 3 else parameters)
    grads = 2 * (shard if stage >= 2 else parameters)
    optimizer = 12 * (shard if stage >= 1 else parameters)
    return weights + grads + optimizer


# A window: (K pipeline steps, the micro-batch sizes of each step); the second has uneven micro-batches.
WINDOW_CASES = [(3, (2, 2)), (2, (3, 1, 2)), (4, (1, 3))]


def _window_case(steps: int, sizes: tuple[int, ...], seed: int):
    """Two stages of a fresh `make_mlp(4, 4)` and a window of `steps` steps with micro-batches of `sizes`."""
    g = torch.Generator().manual_seed(seed)
    window = [[(torch.randn(b, 4, generator=g), torch.randn(b, 4, generator=g)) for b in sizes] for _ in range(steps)]
    return make_mlp(depth=4, width=4, seed=seed), window


def _window_mistakes(model: torch.nn.Module, window, cut: int) -> dict[str, torch.Tensor]:
    """Each mistake's gradient, from each micro-batch's mean-loss gradient on the unsplit model (plain autograd)."""
    grads = []
    for step in window:
        row = []
        for x, y in step:
            model.zero_grad(set_to_none=True)
            torch.nn.functional.mse_loss(model(x), y).backward()
            row.append(torch.cat([p.grad.reshape(-1) for p in model.parameters()]))
        grads.append(row)
    model.zero_grad(set_to_none=True)
    n = sum(len(x) for step in window for x, _ in step)
    weights = [[len(x) / n for x, _ in step] for step in window]
    right = sum(w * g for ws, gs in zip(weights, grads) for w, g in zip(ws, gs))
    twice = sum(w * w * g for ws, gs in zip(weights, grads) for w, g in zip(ws, gs))
    moving = torch.zeros_like(right)
    for gs in grads:  # loss / K, then the whole pile / m after each step
        moving = (moving + sum(gs) / len(window)) / len(gs)
    return {
        "right": right,
        "stage 1's gradient is right, stage 0's is n_i / n times smaller: the scale was applied again where the "
        "gradient crossed the cut, once per stage (deepspeedai/DeepSpeed #8152, 1/GAS^2 upstream; PR #8154 scales "
        "at the last stage only)": torch.cat([twice[:cut], right[cut:]]),
        "the pile was divided by m after every pipeline step and the loss only by K: each earlier step shrinks by m "
        "once more, a moving average that keeps mostly the last step (pytorch/torchtitan #1733; PR #1732 turns "
        "scale_grads off and scales the loss by 1/(K m))": moving,
        "only the window's last step is in .grad: the gradients were set to None between steps (NVIDIA-NeMo/Automodel "
        "PR #3530, where the loss looked fine and only the gradient norm gave it away)":
            sum(w * g for w, g in zip(weights[-1], grads[-1])),
        "each micro-batch's mean loss reached backward() undivided: K m times the window's mean (the symptom "
        "deepspeedai/DeepSpeed #7773 reports: the gradient norm grows with the micro-batch count)":
            sum(g for gs in grads for g in gs),
        "each micro-batch weighed 1 / (K m): right only for equal micro-batches; weight each loss by its share n_i / n "
        "of the window's examples": sum(g for gs in grads for g in gs) / sum(len(gs) for gs in grads),
        "stage 0 has no gradient: hand the gradient stage 1 received back across the cut, "
        "`h.backward(h_received.grad)`": torch.cat([torch.zeros_like(right[:cut]), right[cut:]]),
    }


def check_window_loop(answer: Callable) -> Feedback:
    """Judge a window loop `answer(stage0, stage1, window)`: its .grad against the unsplit model's; name a mistake."""
    for seed, (steps, sizes) in enumerate(WINDOW_CASES):
        model, window = _window_case(steps, sizes, seed)
        stage0, stage1 = split_model(model, 2)
        if is_placeholder(answer(stage0, stage1, window)) and all(p.grad is None for p in model.parameters()):
            return not_attempted("fill in the body of the window loop, then run the cell again")
        if all(p.grad is None for p in model.parameters()):
            return incorrect("no gradient reached .grad: call backward() on each micro-batch's scaled loss")
        grad = torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1).detach().clone()
                          for p in model.parameters()])
        expected = _window_mistakes(model, window, sum(p.numel() for p in stage0.parameters()))
        if torch.allclose(grad, expected.pop("right"), rtol=1e-4, atol=1e-7):
            continue
        for message, mistaken in expected.items():
            if torch.allclose(grad, mistaken, rtol=1e-4, atol=1e-7):
                return incorrect(f"on K = {steps} steps of micro-batches {list(sizes)}: {message}.")
        truth = _window_mistakes(model, window, 0)["right"]
        return incorrect(f"on K = {steps} steps of micro-batches {list(sizes)} the gradient's norm is "
                         f"{float(grad.norm() / truth.norm()):.3g} times the unsplit model's: every micro-batch's "
                         "loss needs its share n_i / n of the window, applied once, and .grad kept across the steps")
    return correct("the unsplit model's gradient on every window tried, uneven micro-batches included: each loss "
                   "carries n_i / n of the window once, and .grad piles up across all K steps.")


def stages_exercises() -> ExerciseSet:
    """The exercises of researcher notebook 7."""
    return ExerciseSet("Shards and stages", [
        Exercise(
            name="bubble", title="The pipeline bubble",
            prompt="Write `bubble_fraction(stages, micro_batches)`: the share of a GPipe or 1F1B timeline's stage-slots "
            "that stand idle, for any p and m (forward and backward one slot each). "
            "`ex.bubble.check(bubble_fraction)`.",
            checker=_check_bubble,
            hints=["Count on the grid: each stage does 2m slots of work; how long does the whole run last?",
             "The first micro-batch needs p - 1 slots to reach the last stage, and its gradient p - 1 to come back.",
             "The run lasts 2 (m + p - 1) slots; the idle share is what is not 2m of them."],
            solution=bubble_fraction,
            explanation="Fill and drain cost p - 1 slots whatever m is, so a pipeline needs many micro-batches: m >> p.",
        ),
        Exercise(
            name="zero_bytes", title="ZeRO bytes per rank",
            prompt="Write `bytes_per_rank(parameters, stage, world_size)`: the bytes one rank holds for mixed-precision "
            "Adam (2-byte weights, 2-byte gradients, 12 bytes of fp32 optimizer state per parameter) under ZeRO "
            "stage 0-3, a shard being ceil(P / N) parameters. `ex.zero_bytes.check(bytes_per_rank)`.",
            checker=_check_zero,
            hints=["Stage 0 is plain data parallelism: 16 bytes per parameter on every rank.",
             "Stage 1 shards the optimizer state, stage 2 also the gradients, stage 3 also the weights.",
             "Sharded means ceil(P / N) parameters per rank: -(-P // N) in Python."],
            solution=bytes_per_rank,
            explanation="Each stage divides one more term by N; stage 3 reaches 16 P / N.",
        ),
        Exercise(
            name="window", title="A window of pipeline steps",
            prompt="Write `my_window(stage0, stage1, window)`: one update's gradient into both stages' `.grad`, where "
            "`window` is K pipeline steps, each a list of (x, y) micro-batches, the loss the MSE. The checker tries "
            "windows of its own, uneven micro-batches included. `ex.window.check(my_window)`.",
            checker=check_window_loop,
            hints=["Start from the two-stage GPipe loop of section 3 and wrap it in `for step in window:`.",
             "Count the examples n of the whole window first; each micro-batch's loss carries len(x) / n, once.",
             "The gradient stage 0 receives is already scaled: pass it on as it is, and never empty .grad "
             "inside the window."],
            solution=window_gradient,
            explanation="One scale, applied once, over the whole window; .grad is only emptied after the update.",
        ),
    ])
