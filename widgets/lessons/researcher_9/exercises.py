"""Researcher notebook 9's exercises (`adam_exercises`): function answers judged on cases of the checker's own."""
from __future__ import annotations

import math

from widgets.exercises.toolkit import Exercise, ExerciseSet, Feedback, as_number, as_numbers, close_to, correct
from widgets.exercises.toolkit import diagnose, incorrect, two_numbers
from widgets.lessons.researcher_9.adam_k import adamw_tau, weight_decay_for_same_tau

# (lr, beta1, beta2, eps, k): none is the notebook's (1e-3, 0.9, 0.999, 1e-8) at k = 4
MALLADI_CASES = ((3e-4, 0.95, 0.98, 1e-6, 2), (1e-2, 0.8, 0.99, 1e-8, 3), (2e-3, 0.9, 0.95, 1e-7, 0.5),
                 (5e-4, 0.97, 0.995, 1e-8, 8))
HALF_LIFE_CASES = ((0.95, 8), (0.9, 16), (0.99, 0.25), (0.999, 3))  # (beta, k)
TAU = dict(batch=512, lr=1e-3, weight_decay=0.1, dataset_size=1_024_000, k=4)
# (micro_steps, {first micro-step: K}): every change falls on a window boundary
UPDATE_CASES = ((100, {0: 2, 20: 8}), (7, {0: 3}), (61, {0: 4, 16: 2, 40: 16}), (16, {0: 4, 16: 2}),
                (0, {0: 5}), (45, {0: 1, 5: 10}))


def scale(lr: float, beta1: float, beta2: float, eps: float, k: float) -> tuple[float, float, float, float]:
    """Worked answer: Adam's hyperparameters for a batch k times larger (Malladi et al., 2022)."""
    return lr * math.sqrt(k), 1 - k * (1 - beta1), 1 - k * (1 - beta2), eps / math.sqrt(k)


def _check_malladi(answer: object) -> Feedback:
    for case in MALLADI_CASES:
        lr, b1, b2, eps, k = case
        got = as_numbers(answer(lr, b1, b2, eps, k), "scale(...)")
        if len(got) != 4:
            return incorrect(f"return four numbers, (lr, beta1, beta2, eps); got {len(got)}")
        want = scale(lr, b1, b2, eps, k)
        where = f"for (lr, beta1, beta2, eps, k) = ({', '.join(f'{v:g}' for v in case)})"
        if not close_to(got[0], want[0]):
            return diagnose(got[0], {lr * k: f"{where} your lr is lr x k: the linear rule is SGD's; Adam's is "
                                               "lr x sqrt(k)",
                                     lr: f"{where} the lr is unchanged: it grows by sqrt(k)"},
                            f"{where} your lr is {got[0]:.4g}, not lr x sqrt(k) = {want[0]:.4g}")
        for name, i, beta in (("beta1", 1, b1), ("beta2", 2, b2)):
            if not close_to(got[i], want[i], rel=1e-6):
                return diagnose(got[i], {beta: f"{where} {name} is unchanged: one update now holds k times the "
                                               "examples, so 1 - beta grows k-fold (that is the LR-only rule)",
                                         beta**k: f"{where} your {name} is beta**k, the half-life rule: Malladi's "
                                                  "rule is linear in 1 - beta, 1 - k (1 - beta)",
                                         1 - (1 - beta) / k: f"{where} 1 - {name} is divided by k: it is multiplied"},
                                f"{where} your {name} is {got[i]:.6g}, not 1 - k (1 - beta) = {want[i]:.6g}")
        if not close_to(got[3], want[3]):
            return diagnose(got[3], {eps: f"{where} eps is unchanged: it shrinks by sqrt(k), like the noise in "
                                          "the gradient it is added to",
                                     eps * math.sqrt(k): f"{where} eps grows by sqrt(k): it shrinks by it"},
                            f"{where} your eps is {got[3]:.4g}, not eps / sqrt(k) = {want[3]:.4g}")
    return correct("lr x sqrt(k), 1 - beta x k for both betas, eps / sqrt(k): on every case, k < 1 included.")


def _check_half_life(answer: object) -> Feedback:
    for beta, k in HALF_LIFE_CASES:
        got = as_number(answer(beta, k), "new_beta(...)")
        want = beta**k
        if close_to(got, want, rel=1e-9):
            continue
        where = f"for beta = {beta:g}, k = {k:g}"
        linear = 1 - k * (1 - beta)
        return diagnose(got, {linear: f"{where} you gave 1 - k (1 - beta) = {linear:.4g}: Malladi's first-order "
                                      "rule, not the same half-life (and below zero once k (1 - beta) > 1)",
                              beta: f"{where} beta is unchanged: its half-life in updates stays, so in examples it "
                                    "grows k-fold",
                              beta ** (1 / k): f"{where} beta**(1/k) forgets more slowly per update; an update "
                                               "holding k times the examples must forget as much as k updates"},
                        f"{where} your beta is {got:.6g}, not the one with the same half-life in examples, "
                        f"{want:.6g}")
    return correct("beta**k: after one update of k*b examples the weight left is beta**k, as after k updates of b.")


def new_beta(beta: float, k: float) -> float:
    """Worked answer: the beta with the same half-life in examples at a batch k times larger."""
    return beta**k


def _check_tau(answer: object) -> Feedback:
    tau, decay = two_numbers(answer, "(tau_in_epochs, new_weight_decay)")
    t = TAU
    want_tau = adamw_tau(t["batch"], t["lr"], t["weight_decay"], t["dataset_size"])
    new_lr = t["lr"] * math.sqrt(t["k"])
    want_decay = weight_decay_for_same_tau(t["batch"], t["lr"], t["weight_decay"], t["batch"] * t["k"], new_lr)
    if not close_to(tau, want_tau):
        per_update = 1 / (t["lr"] * t["weight_decay"])
        return diagnose(tau, {per_update: "that is tau in updates, 1 / (lr weight_decay); an epoch has D / B updates",
                              1 / want_tau: "inverted: tau = B / (lr weight_decay D)"},
                        f"{tau:g} epochs is not B / (lr weight_decay D)")
    if close_to(decay, want_decay):
        return correct(f"tau = {want_tau:g} epochs; with B x 4 and lr x 2 the decay must double to "
                       f"{want_decay:g} to keep it.")
    return diagnose(decay, {t["weight_decay"]: "unchanged weight decay: tau doubles, the weights decay half as much "
                                               "per example",
                            t["weight_decay"] * t["k"]: "that keeps tau for B x 4 at the old lr; the lr grew by 2 too",
                            t["weight_decay"] / 2: "the other way round: B grew 4-fold and the lr 2-fold, so the decay "
                                                   "must grow 2-fold"},
                    f"a weight decay of {decay:g} does not keep tau = B / (lr weight_decay D)")


def updates_done(micro_steps: int, k_from: dict[int, int]) -> int:
    """Worked answer: the updates completed after `micro_steps` micro-steps, K being k_from[s] from micro-step s on."""
    starts = sorted(k_from)
    done = 0
    for i, start in enumerate(starts):
        end = min(starts[i + 1] if i + 1 < len(starts) else micro_steps, micro_steps)
        if end > start:
            done += (end - start) // k_from[start]  # whole windows only: a half-built pile is no update
    return done


def _check_updates(answer: object) -> Feedback:
    for micro_steps, k_from in UPDATE_CASES:
        got = as_number(answer(micro_steps, dict(k_from)), "updates_done(...)")
        want = updates_done(micro_steps, k_from)
        if got == want:
            continue
        where = f"after {micro_steps} micro-steps with k_from = {k_from}"
        now = k_from[max(s for s in k_from if s <= micro_steps)]
        return diagnose(got, {micro_steps // now: f"{where} you divided all micro-steps by the K in use now ({now}): "
                                                  "the windows before the change held another K",
                              micro_steps: f"{where} you counted micro-steps: the schedule must count updates",
                              micro_steps // k_from[0]: f"{where} you divided by the first K: K changed since"},
                        f"{where} you gave {got:g} updates; the windows completed number {want}")
    return correct("each stretch of constant K adds its whole windows; the scheduler steps once per update.")


def adam_exercises() -> ExerciseSet:
    """The exercises of researcher notebook 9."""
    return ExerciseSet("Adam when K changes", [
        Exercise(
            name="malladi", title="Malladi's square-root rule",
            prompt="Write `scale(lr, beta1, beta2, eps, k)` returning Adam's `(lr, beta1, beta2, eps)` for a batch k times "
            "larger by the SDE rule of Malladi et al. (2022). The checker tries cases of its own, k < 1 included: "
            "`ex.malladi.check(scale)`.",
            checker=_check_malladi,
            hints=["The noise of one update falls as 1 / sqrt(k): the learning rate grows by sqrt(k); eps follows the noise.",
             "Each moving average must forget k times as much per update: 1 - beta is multiplied by k."],
            solution=scale,
            explanation="The rule keeps the same SDE; it needs k (1 - beta) < 1, or a beta would be negative.",
        ),
        Exercise(
            name="half_life", title="beta with the same half-life in examples",
            prompt="Write `new_beta(beta, k)`: the moving-average factor at a batch k times larger whose half-life, counted "
            "in examples, is unchanged. `ex.half_life.check(new_beta)`.",
            checker=_check_half_life,
            hints=["After n updates a gradient's weight is beta**n; at a batch k times larger, n updates hold k n of the "
             "old updates' examples.",
             "One new update must leave the weight k old updates left."],
            solution=new_beta,
            explanation="beta**k; for small 1 - beta it is 1 - k (1 - beta), Malladi's rule, and it stays in [0, 1) for any k.",
        ),
        Exercise(
            name="tau", title="AdamW's timescale when K grows",
            prompt="B = 512, lr = 0.001, weight_decay = 0.1, D = 1,024,000 examples. What is tau in epochs? K then grows "
            "4-fold and the lr 2-fold (square root): which weight decay keeps tau? "
            "`ex.tau.check((tau, new_weight_decay))`.",
            checker=_check_tau,
            hints=["tau = B / (lr weight_decay D), in epochs.",
             "Hold B / (lr weight_decay) fixed: B x 4 and lr x 2 leave weight_decay to grow by 4 / 2."],
            solution="tau = 512 / (1e-3 * 0.1 * 1_024_000)   # 5.0 epochs\nnew_weight_decay = 0.1 * 4 / 2   # 0.2",
            explanation="Each update shrinks the weights by 1 - lr weight_decay, and an epoch has D / B updates.",
        ),
        Exercise(
            name="updates", title="The update count after a K change",
            prompt="Write `updates_done(micro_steps, k_from)`: the optimizer updates completed after `micro_steps` "
            "micro-steps when K is `k_from[s]` from micro-step s on (e.g. {0: 4, 40: 8}); changes fall on window "
            "boundaries and a half-built window is no update. `ex.updates.check(updates_done)`.",
            checker=_check_updates,
            hints=["Split the micro-steps into stretches of constant K.",
             "Each stretch adds (its micro-steps) // K; micro_steps // (the K now) miscounts the earlier stretches."],
            solution=updates_done,
            explanation="This is the count an LR scheduler needs: the lab's loop steps it once per update, whatever K is.",
        ),
    ])
