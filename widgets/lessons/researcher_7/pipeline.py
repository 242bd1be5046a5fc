"""Pipeline parallelism is gradient accumulation: GPipe and 1F1B schedules simulated on a stages x slots grid,
and run on one process (the same gradient as the unsplit model)."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from widgets.core.accumulation import flat_grad
from widgets.core.config import FLOAT32, check_int, check_memory

SCHEDULES = ("gpipe", "1f1b")


@dataclass(frozen=True)
class Op:
    """One operation: `kind` "F", "B" or "W" (the weights' gradient split off) of `micro_batch` on `stage`, in its slots."""

    stage: int
    micro_batch: int
    kind: str
    start: int
    slots: int = 1

    @property
    def end(self) -> int:
        return self.start + self.slots


def stage_order(schedule: str, stage: int, stages: int, micro_batches: int) -> list[tuple[str, int]]:
    """The order of `stage`'s 2 m operations: GPipe all forwards then all backwards; 1F1B fills, then alternates."""
    m = micro_batches
    if schedule == "gpipe":
        return [("F", i) for i in range(m)] + [("B", i) for i in range(m)]
    warmup = min(stages - stage - 1, m)
    order = [("F", i) for i in range(warmup)]
    for i in range(warmup, m):
        order += [("F", i), ("B", i - warmup)]
    return order + [("B", i) for i in range(m - warmup, m)]


@dataclass(frozen=True)
class Timeline:
    """Every operation of one update, and what a reader measures on the grid."""

    schedule: str
    stages: int
    micro_batches: int
    ops: tuple[Op, ...]

    @property
    def makespan(self) -> int:
        """Slots from the first forward to the end of the last backward."""
        return max(op.end for op in self.ops)

    @property
    def bubble_fraction(self) -> float:
        """Idle stage-slots / all stage-slots, counted on the grid."""
        total = self.stages * self.makespan
        return (total - sum(op.slots for op in self.ops)) / total

    def in_flight(self, stage: int) -> list[int]:
        """Micro-batches whose activations `stage` holds at the end of each slot."""
        frees = "W" if any(op.kind == "W" for op in self.ops) else "B"  # split: W frees the activations
        held, counts = 0, []
        by_end = {op.end: op for op in self.ops if op.stage == stage}
        for t in range(1, self.makespan + 1):
            op = by_end.get(t)
            held += 0 if op is None else (1 if op.kind == "F" else -1 if op.kind == frees else 0)
            counts.append(held)
        return counts

    def peak_in_flight(self) -> list[int]:
        """Per stage, the most micro-batches' activations held at once: GPipe m, 1F1B p - stage."""
        return [max(self.in_flight(s)) for s in range(self.stages)]


def simulate(schedule: str, stages: int, micro_batches: int, backward_slots: int = 1,
             split_backward: bool = False) -> Timeline:
    """Place each operation at the first slot where its stage is free and its input has arrived; a backward takes
    `backward_slots`, or with `split_backward` B (one slot) and W, run when the stage would idle (Qi et al. 2024)."""
    if schedule not in SCHEDULES:
        raise ValueError(f"schedule must be one of {SCHEDULES}, got {schedule!r}")
    p = check_int("stages", stages, 1, 64)
    m = check_int("micro_batches", micro_batches, 1, 256)
    back = check_int("backward_slots", backward_slots, 1 + bool(split_backward), 8)
    queues = [stage_order(schedule, s, p, m) for s in range(p)]
    weights: list[list[int]] = [[] for _ in range(p)]  # split: micro-batches whose W may run on each stage
    done: dict[tuple[str, int, int], int] = {}  # (kind, stage, micro_batch) -> the slot it ends at
    free = [0] * p  # the first slot each stage is free again
    ops: list[Op] = []
    t = 0
    while any(queues) or any(weights):
        for s in range(p):
            if free[s] > t:
                continue
            if queues[s]:
                kind, i = queues[s][0]
                needs = ("F", s - 1, i) if kind == "F" else (("B", s + 1, i) if s < p - 1 else ("F", s, i))
                if (kind == "F" and s == 0) or done.get(needs, t + 1) <= t:
                    queues[s].pop(0)
                    slots = 1 if kind == "F" or split_backward else back
                    ops.append(Op(s, i, kind, t, slots))
                    done[(kind, s, i)], free[s] = t + slots, t + slots
                    if kind == "B" and split_backward:
                        weights[s].append(i)
                    continue
            if weights[s] and done[("B", s, weights[s][0])] <= t:  # otherwise idle: a waiting W fills the slot
                ops.append(Op(s, weights[s].pop(0), "W", t, back - 1))
                free[s] = t + back - 1
        t += 1
    return Timeline(schedule, p, m, tuple(ops))


def bubble_formula(stages: int, micro_batches: int) -> float:
    """(p - 1) / (m + p - 1): the share of a synchronous pipeline's stage-time spent idle."""
    p, m = check_int("stages", stages, 1), check_int("micro_batches", micro_batches, 1)
    return (p - 1) / (m + p - 1)


def split_model(model: torch.nn.Sequential, stages: int) -> list[torch.nn.Sequential]:
    """Cut a Sequential into `stages` contiguous pieces (sharing the model's parameters)."""
    layers = list(model)
    p = check_int("stages", stages, 1, len(layers))
    bounds = [round(k * len(layers) / p) for k in range(p + 1)]
    return [torch.nn.Sequential(*layers[bounds[k]:bounds[k + 1]]) for k in range(p)]


def gpipe_two_stages(stage0: torch.nn.Module, stage1: torch.nn.Module,
                     micro_batches: list[tuple[torch.Tensor, torch.Tensor]]) -> None:
    """GPipe on two stage modules: every forward, then every backward; .grad ends as the whole
    batch's."""
    n = sum(len(x) for x, _ in micro_batches)
    held = []
    for x, y in micro_batches:  # all forwards first (GPipe)
        h = stage0(x)
        # the cut: stage 1 gets a plain tensor, as over a wire
        h_received = h.detach().requires_grad_()
        # n_i / n: a mean over all n
        loss = torch.nn.functional.mse_loss(stage1(h_received), y) * len(x) / n
        held.append((h, h_received, loss))
    for h, h_received, loss in held:  # then every backward: each adds into .grad
        loss.backward()
        h.backward(h_received.grad)


@dataclass(frozen=True)
class PipelineRun:
    """What running a timeline left: the summed gradient and the activations each stage really held."""

    gradient: torch.Tensor
    peak_in_flight: list[int]


def run_pipeline(stages: list[torch.nn.Module], micro_batches: list[tuple[torch.Tensor, torch.Tensor]],
                 timeline: Timeline) -> PipelineRun:
    """Run `timeline` in slot order, the gradient crossing each cut by hand; .grad ends as the whole batch's."""
    if len(stages) != timeline.stages or len(micro_batches) != timeline.micro_batches:
        raise ValueError(f"the timeline is for {timeline.stages} stages and {timeline.micro_batches} micro-batches, "
                         f"got {len(stages)} stages and {len(micro_batches)} micro-batches")
    n = sum(len(x) for x, _ in micro_batches)
    last = len(stages) - 1
    inputs, outputs = {}, {}  # (stage, micro_batch) -> the tensors a backward still needs
    peaks = [0] * len(stages)
    for op in sorted(timeline.ops, key=lambda o: (o.start, o.stage)):
        s, i = op.stage, op.micro_batch
        if op.kind == "F":
            x = micro_batches[i][0] if s == 0 else outputs[(s - 1, i)].detach().requires_grad_()
            out = stages[s](x)
            if s == last:  # weight n_i / n: the sum over micro-batches is the mean over the whole batch
                out = torch.nn.functional.mse_loss(out, micro_batches[i][1]) * len(x) / n
            inputs[(s, i)], outputs[(s, i)] = x, out
            peaks[s] = max(peaks[s], sum(1 for key in outputs if key[0] == s))
        else:
            out = outputs.pop((s, i))
            # backward adds into .grad: this is the accumulation, micro-batch after micro-batch
            out.backward() if s == last else out.backward(inputs[(s + 1, i)].grad)
            if s < last:
                del inputs[(s + 1, i)]  # the next stage's input was only kept for the gradient it carries back
    params = [p for stage in stages for p in stage.parameters()]
    return PipelineRun(torch.cat([p.grad.reshape(-1) for p in params]), peaks)


def unsplit_gradient(model: torch.nn.Module, micro_batches: list[tuple[torch.Tensor, torch.Tensor]]) -> torch.Tensor:
    """The reference: one backward of the mean MSE over all examples at once, on the whole model."""
    x = torch.cat([x for x, _ in micro_batches])
    y = torch.cat([y for _, y in micro_batches])
    model.zero_grad(set_to_none=True)
    torch.nn.functional.mse_loss(model(x), y).backward()
    grad = flat_grad(model)
    model.zero_grad(set_to_none=True)
    return grad


def make_mlp(depth: int = 4, width: int = 16, seed: int = 0) -> torch.nn.Sequential:
    """`depth` Linear(width, width) + Tanh blocks: enough layers to cut into up to `depth` stages."""
    check_int("depth", depth, 1, 32)
    check_int("width", width, 1, 1024)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        layers = [torch.nn.Sequential(torch.nn.Linear(width, width), torch.nn.Tanh()) for _ in range(depth)]
    return torch.nn.Sequential(*layers)


def make_micro_batches(micro_batches: int, micro_batch_size: int, width: int = 16,
                       seed: int = 0) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """`micro_batches` pairs (x, y), each (micro_batch_size, width) float32, from `seed`."""
    check_int("micro_batches", micro_batches, 1, 256)
    check_int("micro_batch_size", micro_batch_size, 1)
    check_int("width", width, 1, 1024)  # make_mlp's range
    check_memory(f"make_micro_batches({micro_batches}, {micro_batch_size}, width={width})",
                 2 * micro_batches * micro_batch_size * width * FLOAT32)
    g = torch.Generator().manual_seed(seed)
    return [(torch.randn(micro_batch_size, width, generator=g), torch.randn(micro_batch_size, width, generator=g))
            for _ in range(micro_batches)]
