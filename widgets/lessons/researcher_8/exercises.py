"""Researcher notebook 8's exercises: function answers judged on the example, then on fresh seeded cases."""
from __future__ import annotations

import functools
import random
from typing import Callable

import torch

from widgets.exercises.toolkit import Exercise, ExerciseSet, Feedback, as_numbers, close_to, correct, incorrect
from widgets.exercises.toolkit import not_attempted
from widgets.lessons.researcher_8.rl_losses import LOSS_TYPES, token_weights

MAX_LEN = 16


# --- 1. the weight a token gets ------------------------------------------------------------

def completion_weights(lengths: list[list[int]], loss_type: str, max_len: int) -> list[list[float]]:
    """Worked answer: the weight every token of each completion gets (micro-batch k: `lengths[k]`)."""
    K = len(lengths)
    window_tokens = sum(sum(mb) for mb in lengths)
    weights = []
    for mb in lengths:
        if loss_type == "grpo":  # the token mean of the completion, then the mean over K x n completions
            weights.append([1 / (K * len(mb) * n) for n in mb])
        elif loss_type == "dr_grpo":  # a constant: completions x max_len
            weights.append([1 / (K * len(mb) * max_len)] * len(mb))
        elif loss_type == "bnpo":  # the micro-batch's token mean, divided by K
            weights.append([1 / (K * sum(mb))] * len(mb))
        else:  # dapo: the token mean over the whole window
            weights.append([1 / window_tokens] * len(mb))
    return weights


_WEIGHT_EXAMPLE = [[3, 9], [4, 12]]


def _weight_cases(seed: int = 8, count: int = 30) -> list[list[list[int]]]:
    rng = random.Random(seed)
    return [[[rng.randint(1, MAX_LEN) for _ in range(rng.randint(1, 4))] for _ in range(rng.randint(1, 6))]
            for _ in range(count)]


_WEIGHT_CASES = [_WEIGHT_EXAMPLE] + _weight_cases()

# Typical wrong rules, per loss type: (the weights they give, what to say).
_WEIGHT_MISTAKES: dict[str, list[tuple[Callable, str]]] = {
    "grpo": [(lambda L, m: [[1 / (len(mb) * n) for n in mb] for mb in L], "not divided by K: the K micro-batches' "
              "losses add up to K x the mean"),
             (lambda L, m: [[1 / (len(L) * len(mb))] * len(mb) for mb in L], "grpo averages each completion's "
              "tokens first: a token weighs 1 / its completion's length, not 1"),
             (lambda L, m: token_weights(L, "dapo", m), "that is dapo's weight (1 / all the window's tokens); grpo "
              "takes each completion's token mean, then the mean over completions")],
    "dr_grpo": [(lambda L, m: [[1 / (len(mb) * m)] * len(mb) for mb in L], "not divided by K"),
                (lambda L, m: [[1 / (len(L) * len(mb) * max(mb))] * len(mb) for mb in L], "dr_grpo divides by the "
                 "maximum completion *length setting* (max_len), a constant, not the longest completion present")],
    "bnpo": [(lambda L, m: token_weights(L, "dapo", m), "that is dapo's weight, the fix: bnpo divides by its own "
              "micro-batch's tokens (then by K), which is why it does not survive re-partitioning"),
             (lambda L, m: [[1 / sum(mb)] * len(mb) for mb in L], "not divided by K")],
    "dapo": [(lambda L, m: token_weights(L, "bnpo", m), "that is bnpo's weight (its own micro-batch's tokens, x K): "
              "dapo divides by the tokens of the whole window"),
             (lambda L, m: [[1 / (len(L) * sum(map(sum, L)))] * len(mb) for mb in L],
              "the window's token count already covers all K micro-batches: do not divide by K as well (the "
              "ms-swift issue #10117 bug)")],
}


def _check_weights(answer: object) -> Feedback:
    if answer([list(mb) for mb in _WEIGHT_EXAMPLE], "grpo", MAX_LEN) is None:
        return not_attempted("your function returns None: fill in its body")
    for loss_type in LOSS_TYPES:
        for case in _WEIGHT_CASES:
            got = as_numbers(answer([list(mb) for mb in case], loss_type, MAX_LEN), "completion_weights(...)")
            if close_to(got, as_numbers(token_weights(case, loss_type, MAX_LEN)), rel=1e-6):
                continue
            for rule, message in _WEIGHT_MISTAKES[loss_type]:
                if close_to(got, as_numbers(rule(case, MAX_LEN)), rel=1e-6):
                    return incorrect(f"{loss_type}, lengths {case}: {message}.")
            where = "the notebook's example" if case is _WEIGHT_EXAMPLE else "a fresh case"
            return incorrect(f"{loss_type}, lengths {case} ({where}, max_len {MAX_LEN}): your weights "
                             f"{[round(g, 5) for g in got]} are not the ones its loss gives each token.")
    return correct("each loss type's weight, on the example and on 30 fresh windows: only dapo's (1 / the window's "
                   "tokens) and, with equal micro-batches, grpo's and dr_grpo's do not depend on the split.")


# --- 2. the normaliser dapo must be given -------------------------------------------------

def dapo_normalisers(micro_batch_tokens: list[int], accumulation_steps: int) -> list[int]:
    """Worked answer: each micro-batch divides its summed token loss by the tokens of its update window."""
    K = accumulation_steps
    windows = [micro_batch_tokens[i:i + K] for i in range(0, len(micro_batch_tokens), K)]
    return [sum(window) for window in windows for _ in window]


_NORM_EXAMPLE = ([30, 50, 20, 40], 2)


def _norm_cases(seed: int = 9, count: int = 30) -> list[tuple[list[int], int]]:
    rng = random.Random(seed)
    cases = []
    for _ in range(count):
        k = rng.randint(1, 6)
        cases.append(([rng.randint(1, 500) for _ in range(k * rng.randint(1, 4) + rng.randint(0, k - 1))], k))
    return cases


_NORM_CASES = [_NORM_EXAMPLE] + _norm_cases()
_NORM_MISTAKES: list[tuple[Callable, str]] = [
    (lambda t, k: [sum(t)] * len(t), "that is the whole generation's token count, what a trainer counts once per "
     "generation: when steps_per_generation != K an update sees only part of it (huggingface/trl PR #6024)"),
    (lambda t, k: list(t), "that is each micro-batch's own count, bnpo: every token of a short micro-batch "
     "then weighs more"),
    (lambda t, k: [k * n for n in t], "K x each micro-batch's own count is bnpo again: right only when every "
     "micro-batch holds the same number of tokens"),
]


def _check_normalisers(answer: object) -> Feedback:
    if answer(list(_NORM_EXAMPLE[0]), _NORM_EXAMPLE[1]) is None:
        return not_attempted("your function returns None: fill in its body")
    for tokens, k in _NORM_CASES:
        got = as_numbers(answer(list(tokens), k), "dapo_normalisers(...)")
        expected = dapo_normalisers(tokens, k)
        if close_to(got, expected):
            continue
        for rule, message in _NORM_MISTAKES:
            if close_to(got, rule(tokens, k)):
                return incorrect(f"tokens {tokens}, K = {k}: {message}.")
        if len(got) != len(tokens):
            return incorrect(f"give one normaliser per micro-batch: {len(tokens)} for tokens {tokens}, got {len(got)}")
        where = "the notebook's example" if (tokens, k) == _NORM_EXAMPLE else "a fresh case"
        return incorrect(f"tokens {tokens}, K = {k} ({where}): your normalisers {got} are not the tokens of each "
                         "micro-batch's update window (the last window may be shorter).")
    return correct("each micro-batch divides by the tokens of the K micro-batches its update sums, the last, shorter "
                   "window included: the example and 30 fresh generations.")


# --- 3. the global aux loss from per-micro-batch statistics ---------------------------------

def global_aux(counts: torch.Tensor, prob_sums: torch.Tensor) -> float:
    """Worked answer: the window's E * sum_e f_e * P_e from (K, E) per-micro-batch counts and router-probability sums."""
    E = counts.shape[1]
    tokens = counts.sum()
    f = counts.sum(dim=0) / tokens  # the window's fraction routed to each expert
    P = prob_sums.sum(dim=0) / tokens  # the window's mean router probability of each expert
    return float(E * (f * P).sum())


def _aux_case(seed: int, K: int, E: int, sizes: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    counts, prob_sums = [], []
    for k, n in enumerate(sizes):
        probs = torch.softmax(2 * torch.randn(n, E, generator=g, dtype=torch.float64) + 3 * torch.eye(E)[k % E], dim=1)
        counts.append(torch.bincount(probs.argmax(1), minlength=E).double())
        prob_sums.append(probs.sum(0))
    return torch.stack(counts), torch.stack(prob_sums)


@functools.cache
def aux_cases() -> list[tuple[torch.Tensor, torch.Tensor]]:
    """The notebook's example (4 micro-batches of 64 tokens, 4 experts), then six fresh windows of unequal
    micro-batches; made at the first check, not at import (running torch starts its threads)."""
    return [_aux_case(0, 4, 4, [64, 64, 64, 64])] + [
        _aux_case(s, K, E, [random.Random(s).randint(5, 80) for _ in range(K)])
        for s, (K, E) in enumerate([(2, 3), (3, 5), (5, 4), (6, 8), (4, 2), (8, 6)], 1)]


def _per_micro_batch(counts, prob_sums) -> list[float]:
    E = counts.shape[1]
    return [float(E * (c / c.sum() * p / c.sum()).sum()) for c, p in zip(counts, prob_sums)]


_AUX_MISTAKES: list[tuple[Callable, str]] = [
    (lambda c, p: sum(_per_micro_batch(c, p)) / len(c), "that is the mean of the K micro-batches' own aux losses: "
     "a product of batch statistics is not the mean of per-micro-batch products. Add the counts and the probability "
     "sums over the window first"),
    (lambda c, p: sum(_per_micro_batch(c, p)), "that is the sum of the micro-batches' own aux losses, not divided by "
     "K either (NVIDIA-NeMo/Automodel PR #3359)"),
    (lambda c, p: global_aux(c, p) / c.shape[1], "the loss is E * sum_e f_e * P_e: times the number of experts E, "
     "so that a perfectly balanced router scores 1"),
]


def _check_aux(answer: object) -> Feedback:
    example = aux_cases()[0]
    if answer(example[0].clone(), example[1].clone()) is None:
        return not_attempted("your function returns None: fill in its body")
    for counts, prob_sums in aux_cases():
        got = as_numbers(answer(counts.clone(), prob_sums.clone()), "global_aux(...)")
        if len(got) != 1:
            return incorrect(f"return one number, the window's aux loss; got {len(got)} numbers")
        if close_to(got[0], global_aux(counts, prob_sums), rel=1e-6):
            continue
        for rule, message in _AUX_MISTAKES:
            if close_to(got[0], rule(counts, prob_sums), rel=1e-6):
                return incorrect(message + ".")
        where = "the notebook's example" if counts is example[0] else f"a fresh case (K = {len(counts)}, " \
            f"E = {counts.shape[1]}, micro-batch sizes {[int(c.sum()) for c in counts]})"
        return incorrect(f"on {where} your function gives {got[0]:.5g}; the window's E * sum_e f_e * P_e is not that.")
    return correct("the window's counts and probability sums, added first, then one product: the example and six "
                   "fresh windows of unequal micro-batches.")


def losses_exercises() -> ExerciseSet:
    """The exercises of researcher notebook 8."""
    return ExerciseSet("Losses that see the batch", [
        Exercise(
            name="weights", title="The weight a token gets",
            prompt="Write `completion_weights(lengths, loss_type, max_len)`: `lengths[k]` lists the completion lengths of "
            "micro-batch k of one update (K = len(lengths), one device); return, per micro-batch, the weight every "
            "token of each completion gets in the update's loss, for loss_type grpo, bnpo, dr_grpo or dapo (each "
            "micro-batch's loss divided by K where the loss type does that). `ex.weights.check(completion_weights)`.",
            checker=_check_weights,
            hints=["Write each loss as sum over completions i of w_i x (summed token loss of i), then read off w_i.",
             "grpo: 1 / (K n L_i) with n the micro-batch's completions; dr_grpo: 1 / (K n max_len); bnpo: "
             "1 / (K x the micro-batch's tokens); dapo: 1 / the window's tokens."],
            solution=completion_weights,
            explanation="Only dapo's weight and, while every micro-batch holds as many completions, grpo's and dr_grpo's, are the "
            "same however the window is split.",
        ),
        Exercise(
            name="normaliser", title="The normaliser dapo must be given",
            prompt="A generation holds micro-batches with `micro_batch_tokens[m]` completion tokens each, consumed in "
            "order, K = `accumulation_steps` per update (the last update may get fewer). Write "
            "`dapo_normalisers(micro_batch_tokens, accumulation_steps)`: what each micro-batch must divide its "
            "summed token loss by, one number per micro-batch. `ex.normaliser.check(dapo_normalisers)`.",
            checker=_check_normalisers,
            hints=["dapo is the token mean over the tokens one update sees.",
             "Group the micro-batches K at a time; every micro-batch of a group divides by the group's total."],
            solution=dapo_normalisers,
            explanation="The count belongs to the update window, not to the generation: they differ whenever "
            "steps_per_generation != gradient_accumulation_steps.",
        ),
        Exercise(
            name="aux", title="The global aux loss from per-micro-batch statistics",
            prompt="A top-1 router saw K micro-batches. `counts[k, e]`: the tokens of micro-batch k routed to expert e; "
            "`prob_sums[k, e]`: the sum of expert e's router probability over micro-batch k's tokens (both (K, E) "
            "tensors). Write `global_aux(counts, prob_sums)`, the window's E * sum_e f_e * P_e, as one number. "
            "`ex.aux.check(global_aux)`.",
            checker=_check_aux,
            hints=["f_e is a fraction of all the window's tokens, P_e a mean over all of them: add over the micro-batches "
             "first.",
             "tokens = counts.sum(); f = counts.sum(0) / tokens; P = prob_sums.sum(0) / tokens; then E * (f * P).sum()."],
            solution=global_aux,
            explanation="Added first, then multiplied: the product of the window's statistics, not the mean of the micro-batches' "
            "products.",
        ),
    ])
