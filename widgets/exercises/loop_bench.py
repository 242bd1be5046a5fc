"""The bench for a learner's whole training loop (the gallery's `my_loop`): run it on a tiny problem,
watch it from outside, and say what differs from plain autograd. Torch only.

    observation = run_on_bench(my_loop, SETTINGS[1])
    verdict = judge(observation)        # None when right, else the sentence that says what is wrong

The loop gets a float64 `Linear(6, 1)` without bias, a watched SGD, a mean-reduced MSE, a list
of `(inputs, targets)` micro-batches and K (and a warmup scheduler in one setting). Hooks
(`widgets.exercises.watch`) see every backward pass and the examples it carried; the optimizer
keeps the weights and `.grad` of each `step()`. The truth is computed by autograd at those same
weights: update u must use the gradient of the mean loss over its examples, each micro-batch i
weighted by its share n_i/n of them (with equal micro-batches: 1 / their number), clipped once.
The checks are a list of functions, each naming one fault; the first that finds one is the verdict.
So any correct loop passes, whatever its style: the loss scaled before `backward()` or `.grad`
rescaled at the update (before clipping), `zero_grad` after the step or at the start of a group.
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from typing import Callable

import torch

from widgets.exercises.watch import BackwardWatch

FEATURES = 6
LEARNING_RATE = 0.01
_REL = 1e-7  # float64 sums of the same terms in another order agree to ~1e-15; this leaves room


@dataclass(frozen=True)
class Setting:
    """One run of the bench: K, the examples in each micro-batch (in order), the clip, a scheduler or not."""

    description: str
    accumulation_steps: int
    sizes: tuple[int, ...]
    clip_norm: float | None = 1.0
    with_scheduler: bool = False

    @property
    def groups(self) -> list[range]:
        """The micro-batches (by index) of each update: K of them, fewer in the last group."""
        K, N = self.accumulation_steps, len(self.sizes)
        return [range(s, min(s + K, N)) for s in range(0, N, K)]


SETTINGS = (
    Setting("K = 4 and 10 micro-batches of 5 examples (a last group of 2 micro-batches), clipping at 1.0", 4, (5,) * 10),
    Setting("K = 3, a warmup scheduler and 8 micro-batches whose last holds 2 examples, not 5, clipping at 1.0",
            3, (5,) * 7 + (2,), with_scheduler=True),
)
# The norm of each update's correct (unclipped) gradient, in units of clip_norm, cycled over the
# updates: clipping acts on some updates and not on others, so a loss scaled wrongly shows on the
# unclipped ones, and a clip before the rescale of .grad shows on the one between 1/K and 1.
_GROUP_NORMS = (4.0, 0.1, 0.6)


@dataclass
class Observation:
    """What one run of a loop showed: the watch, each step's (passes so far, weight, .grad, lr), the scheduler."""

    setting: Setting
    batches: list[tuple[torch.Tensor, torch.Tensor]]
    watch: BackwardWatch
    steps: list[tuple[int, torch.Tensor, torch.Tensor | None, float]] = field(default_factory=list)
    scheduler_calls: list[int] = field(default_factory=list)  # steps taken so far at each scheduler.step()
    returned: object = None


class _WatchedSGD(torch.optim.SGD):
    def __init__(self, model: torch.nn.Linear, record: list):
        super().__init__(model.parameters(), lr=LEARNING_RATE)
        self._model, self._record, self.passes = model, record, lambda: 0

    def step(self, closure=None):
        w = self._model.weight
        grad = None if w.grad is None else w.grad.detach().reshape(-1).clone()
        self._record.append((self.passes(), w.detach().reshape(-1).clone(), grad, self.param_groups[0]["lr"]))
        return super().step(closure)


class _WatchedWarmup(torch.optim.lr_scheduler.LambdaLR):
    def __init__(self, optimizer: _WatchedSGD, updates: int, calls: list[int]):
        self._calls = None  # LambdaLR steps once while it is built: that one is not the loop's
        super().__init__(optimizer, lambda u: min(1.0, (u + 1) / (updates + 1)))
        self._calls, self._steps = calls, optimizer._record

    def step(self, *args, **kwargs):
        if self._calls is not None:
            self._calls.append(len(self._steps))
        return super().step(*args, **kwargs)


def make_batches(setting: Setting) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Linear-regression micro-batches in float64, targets scaled per update (see `_GROUP_NORMS`)."""
    g = torch.Generator().manual_seed(7)
    truth = torch.randn(FEATURES, 1, generator=g, dtype=torch.float64)
    batches = []
    for n in setting.sizes:
        x = torch.randn(n, FEATURES, generator=g, dtype=torch.float64)
        batches.append((x, x @ truth + 0.3 * torch.randn(n, 1, generator=g, dtype=torch.float64)))
    if setting.clip_norm is not None:
        for u, group in enumerate(setting.groups):
            zero = torch.zeros(1, FEATURES, dtype=torch.float64)
            norm = float(update_gradient(zero, [batches[j] for j in group]).norm())
            scale = _GROUP_NORMS[u % len(_GROUP_NORMS)] * setting.clip_norm / norm  # the gradient at 0 scales with y
            for j in group:
                batches[j] = (batches[j][0], batches[j][1] * scale)
    return batches


def micro_gradient(weight: torch.Tensor, batch) -> tuple[torch.Tensor, float]:
    """The flat gradient and the value of one micro-batch's mean squared error at `weight` (shape (1, F) or (F,))."""
    w = weight.detach().reshape(1, -1).clone().requires_grad_(True)
    loss = torch.nn.functional.mse_loss(batch[0] @ w.T, batch[1])
    (grad,) = torch.autograd.grad(loss, w)
    return grad.reshape(-1), loss.item()


def shares(batches) -> list[float]:
    """n_i / n for each micro-batch of one update."""
    total = sum(len(t) for _, t in batches)
    return [len(t) / total for _, t in batches]


def update_gradient(weight: torch.Tensor, batches) -> torch.Tensor:
    """The gradient of the mean loss over all the examples of `batches`: micro-batch i weighted by n_i/n."""
    return sum(s * micro_gradient(weight, b)[0] for s, b in zip(shares(batches), batches))


def run_on_bench(loop: Callable, setting: Setting) -> Observation:
    """Call `loop(model, optimizer, loss_fn, batches, K[, scheduler])` once, watched. Raises what the loop raises."""
    batches = make_batches(setting)
    with torch.random.fork_rng(devices=[]):  # Linear's own init draws: the learner's random state stays untouched
        model = torch.nn.Linear(FEATURES, 1, bias=False, dtype=torch.float64)
    with torch.no_grad():
        model.weight.zero_()
    observation = Observation(setting, batches, BackwardWatch(model, model.weight))
    optimizer = _WatchedSGD(model, observation.steps)
    optimizer.passes = lambda: len(observation.watch.passes)
    args = [model, optimizer, torch.nn.MSELoss(), [(x.clone(), y.clone()) for x, y in batches], setting.accumulation_steps]
    if setting.with_scheduler:
        args.append(_WatchedWarmup(optimizer, len(setting.groups), observation.scheduler_calls))
    with observation.watch, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's scheduler-order warning: the checks below say it in words
        observation.returned = loop(*args)
    return observation


# ----------------------------------------------------------------------------- the checks


def _close(a: float, b: float, rel: float = _REL) -> bool:
    return math.isclose(a, b, rel_tol=rel, abs_tol=1e-12)


def _fit(v: torch.Tensor, e: torch.Tensor) -> tuple[float, bool]:
    """v = r * e? The factor r and whether the rest is negligible."""
    ee = float(e @ e)
    if ee == 0:
        return math.nan, bool(v.abs().max() == 0)
    r = float(v @ e) / ee
    return r, float((v - r * e).norm()) <= 1e-6 * (abs(r) + 1) * math.sqrt(ee)


def _empty(g: torch.Tensor | None) -> bool:
    return g is None or bool(g.abs().max() == 0)


def _g(x: float) -> str:
    return f"{x:.3g}"


def _forwards(o: Observation) -> str | None:
    largest = max(o.setting.sizes)
    big = [n for n in o.watch.forwards if n > largest]
    if big:
        return (f"your loop ran the model on {big[0]} examples at once, but no micro-batch holds more than {largest}: "
                "run each micro-batch through the model on its own, or the memory is the big batch's again.")
    return None


def _passes(o: Observation) -> str | None:
    passes, N = o.watch.passes, len(o.setting.sizes)
    joint = next((p for p in passes if len(p) > 1), None)
    if joint:
        return (f"one backward() went through {len(joint)} micro-batches at once ({sum(joint)} examples): their "
                f"losses were added up first ({len(passes)} backward passes for {N} micro-batches). The gradient "
                "comes out the same, but every micro-batch's activations stay alive until that backward, the memory "
                "of the big batch. Call backward() on each micro-batch's loss right after its forward.")
    if not passes:
        return "no backward() pass reached the model: call backward() on each micro-batch's loss."
    tail = len(o.setting.groups[-1])
    if len(passes) == N - tail and tail < o.setting.accumulation_steps:
        return (f"{len(passes)} of {N} micro-batches went through backward(): the last group of {tail} never did, "
                "so its examples never count.")
    if len(passes) != N:
        return f"backward() ran {len(passes)} times for {N} micro-batches: once per micro-batch."
    return None


def _piles(o: Observation) -> str | None:
    w, starts = o.watch, {g.start: u for u, g in enumerate(o.setting.groups)}
    for j in range(1, len(w.passes)):
        before, previous = w.before[j], w.after[j - 1]
        if j in starts:
            if not _empty(before):
                return (f"update {starts[j]} began with the previous update's gradient still in .grad: call "
                        "zero_grad() once per update, after the step (or before a group's first backward).")
        elif _empty(before):
            return (f".grad was empty before micro-batch {j}, inside an update: a zero_grad() inside the group keeps "
                    "only the last micro-batches. Clear the pile once per update.")
        elif not torch.allclose(before, previous, rtol=_REL, atol=0):
            ratio, proportional = _fit(before, previous)
            if proportional and ratio < 1:
                return (f"the pile was shrunk before micro-batch {j}, inside an update: clipping (or rescaling) runs on "
                        "the half-built pile. Do it once per update, after the last backward().")
            return f".grad was changed before micro-batch {j}, inside an update: leave it alone until the update."
    return None


def _steps(o: Observation) -> str | None:
    got = [at for at, *_ in o.steps]
    expected = [g.stop for g in o.setting.groups]
    if got == expected:
        return None
    if not got:
        return "optimizer.step() never ran: step once per update."
    if got == list(range(1, len(o.watch.passes) + 1)):
        return f"optimizer.step() ran after every micro-step ({len(got)} steps, not {len(expected)}): step once per update."
    if got == expected[:-1]:
        return (f"the last group (micro-batches {expected[-2]} to {expected[-1] - 1}) never got its optimizer.step(): "
                "its gradient is left in .grad, never applied. Also step on the last micro-step.")
    return f"optimizer.step() ran after micro-batches {[a - 1 for a in got]}, the updates end after {[e - 1 for e in expected]}."


def _scheduler(o: Observation) -> str | None:
    if not o.setting.with_scheduler:
        return None
    calls, updates = o.scheduler_calls, len(o.setting.groups)
    if calls == list(range(1, updates + 1)):
        return None
    if len(calls) == len(o.setting.sizes):
        return (f"scheduler.step() ran on every micro-step ({len(calls)} times for {updates} updates): the warmup "
                "ends K times too soon. Step it once per update, right after optimizer.step().")
    if calls and calls[0] == 0:
        return "scheduler.step() ran before the first optimizer.step(): step it right after optimizer.step()."
    return f"scheduler.step() ran {len(calls)} times for {updates} updates: once per update, right after optimizer.step()."


def _clip(g: torch.Tensor, clip_norm: float | None) -> tuple[torch.Tensor, float]:
    """Clip like clip_grad_norm_; also the factor applied."""
    if clip_norm is None:
        return g, 1.0
    factor = min(1.0, clip_norm / (float(g.norm()) + 1e-6))
    return g * factor, factor


def _scale_fault(u: int, b: list[float], share: list[float], sizes: list[int], K: int, f: float,
                 norm_G: float, clip_norm: float | None, e: float) -> str | None:
    """What is wrong with how update u weighted and scaled its micro-batches, from the factor b_i each
    micro-batch's mean loss reached backward() with and the factor f of the whole update (used = f x G)."""
    r = [bi / si for bi, si in zip(b, share)]  # each micro-batch's weight relative to its share
    if not all(_close(x, r[0], 1e-6) for x in r):
        counted = "the same" if all(_close(x, b[0], 1e-6) for x in b) else f"in the ratio {[_g(x / b[0]) for x in b]}"
        return (f"update {u} counted its micro-batches {counted}, but they hold {sizes} examples: weight "
                f"micro-batch i by its share n_i/n = {[_g(s) for s in share]} of the update's examples. Dividing "
                "by the number of micro-batches is the same only when they are all the same size, as in the "
                "full groups.")
    r, t = r[0], f / r[0]  # the loss scale, and what the update did to .grad after the last backward
    if _close(r, 1, 1e-6):
        if _close(t, 1, 1e-6):
            return None
        return (f"after update {u}'s last backward() .grad held the right gradient, but was then multiplied by "
                f"{_g(t)}; clipping at {clip_norm} needed {_g(e)}.")
    if _close(t, 1, 1e-6):
        if len(b) < K and all(_close(x, 1 / K, 1e-6) for x in b):
            return (f"the last group's losses were divided by K = {K}, but it holds {len(b)} micro-batches: their "
                    f"shares of its {sum(sizes)} examples are {[_g(s) for s in share]}, so update {u} came out "
                    f"{_g(r)}x the gradient of its mean loss.")
        name = "undivided" if all(_close(x, 1, 1e-6) for x in b) else f"multiplied by {[_g(x) for x in b]}"
        return (f"each micro-batch's loss of update {u} reached backward() {name}, where its share of the "
                f"update is {[_g(s) for s in share]}: the update came out {_g(r)}x the gradient of its mean loss.")
    if clip_norm is not None and _close(f, min(1.0, clip_norm / (r * norm_G)), 1e-5):
        return (f"your loop rescales .grad at the update, after clipping: the clip saw a pile {_g(r)}x too big "
                f"(norm {_g(r * norm_G)}) and cut it to {_g(clip_norm)}, then the rescale shrank it again: "
                f"update {u} came out {_g(f / e)}x the correct gradient. Rescale first, then clip.")
    return (f"at update {u} the losses reached backward() at {_g(r)}x their share n_i/n and .grad was then "
            f"multiplied by {_g(t)}: the update came out {_g(f / e)}x the correct (clipped) gradient.")


def _gradients(o: Observation) -> str | None:
    clip_norm, K = o.setting.clip_norm, o.setting.accumulation_steps
    for u, ((_, weight, used, _), group) in enumerate(zip(o.steps, o.setting.groups)):
        batches = [o.batches[j] for j in group]
        own = [micro_gradient(weight, b)[0] for b in batches]
        share = shares(batches)
        G = sum(s * g for s, g in zip(share, own))
        expected, e = _clip(G, clip_norm)
        if used is None:
            return f"optimizer.step() found .grad empty at update {u}: clear the pile after the step, not before it."
        # 1e-6: clip_grad_norm_ divides by (norm + 1e-6), so a pile clipped at another scale differs by ~1e-7
        if torch.allclose(used, expected, rtol=1e-6, atol=1e-12):
            continue
        faults = []
        if clip_norm is not None and float(used.norm()) > clip_norm * (1 + 1e-6):
            faults.append(f"update {u} used a gradient of norm {_g(float(used.norm()))}, above clip_norm = "
                          f"{_g(clip_norm)}: clip once per update, just before optimizer.step().")
        fits = [_fit(o.watch.incoming[j], g) for j, g in zip(group, own)]
        if not all(exact for _, exact in fits):
            faults.append(f"a micro-batch of update {u} added a gradient that is no multiple of its own mean loss's "
                          "gradient: another loss, or the batches out of order?")
        else:
            f, _ = _fit(used, G)  # the whole update as a multiple of the correct unclipped gradient
            scale = _scale_fault(u, [r for r, _ in fits], share, [len(t) for _, t in batches], K, f,
                                 float(G.norm()), clip_norm, e)
            faults += [scale] if scale else []
        return " Also: ".join(faults) if faults else f"update {u} did not use the correct gradient."
    return None


# What a loop may log for one update, from the micro-batch losses L (undivided means) and sizes n,
# and what to say when its log is exactly that. The right one: the mean over the update's examples.
_LOGS: list[tuple[Callable[[list[float], list[int], int], float], str]] = [
    (lambda L, n, K: sum(L) / len(L), "the plain mean of the micro-batch losses, right only when the micro-batches "
     "are all the same size; update {u}'s hold {sizes} examples. Weight each loss by its size: "
     "sum(n_i * loss_i) / sum(n_i)"),
    (lambda L, n, K: L[-1], "the last micro-batch's loss, not the update's mean"),
    (lambda L, n, K: sum(a * b for a, b in zip(L, n)) / sum(n) / len(L), "the divided loss (the number that goes into "
     "backward()), {times}x too small; log the loss before dividing"),
    (lambda L, n, K: sum(a * b for a, b in zip(L, n)) / sum(n) / K, "the loss divided by K, {times}x too small; "
     "log the loss before dividing"),
    (lambda L, n, K: L[-1] / len(L), "the last micro-batch's divided loss"),
    (lambda L, n, K: sum(L), "the sum of the micro-batch losses, not their mean"),
]


def _log(o: Observation) -> str | None:
    groups, returned = o.setting.groups, o.returned
    if returned is None:
        return ("your loop returns nothing, but the exercise asks it to return the mean loss of each update "
                "(a list, one number per update): add the log.")
    try:
        logged = [float(v) for v in returned]  # type: ignore[union-attr]
    except (TypeError, ValueError):
        return f"your loop returned {type(returned).__name__} {returned!r:.50}, not a list of numbers, one per update."
    if len(logged) != len(groups):
        return f"your loop logged {len(logged)} numbers for {len(groups)} updates: one per update."
    K = o.setting.accumulation_steps
    for u, (value, group) in enumerate(zip(logged, groups)):
        L = [micro_gradient(o.watch.weights[j], o.batches[j])[1] for j in group]
        n = [o.setting.sizes[j] for j in group]
        mean = sum(a * b for a, b in zip(L, n)) / sum(n)
        if _close(value, mean, 1e-6):
            continue
        for rule, message in _LOGS:
            if _close(value, rule(L, n, K), 1e-6):
                said = message.format(u=u, sizes=n, times=_g(mean / value) if value else "inf")
                return f"update {u} logged {value:.4g}, {said}; its mean loss over its {sum(n)} examples is {mean:.4g}."
        return f"update {u} logged {value:.4g}; its mean loss over its {sum(n)} examples is {mean:.4g}."
    return None


CHECKS: tuple[Callable[[Observation], str | None], ...] = (_forwards, _passes, _steps, _piles, _scheduler, _gradients, _log)


def judge(observation: Observation) -> str | None:
    """The first fault the checks find, in words; None when the loop is right in this setting."""
    for check in CHECKS:
        fault = check(observation)
        if fault:
            return fault
    return None
