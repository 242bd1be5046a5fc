"""The loop auditor across ranks: a learner's loop run once per rank, as DistributedDataParallel runs it.

The ranks are threads (a loop defined in a notebook cannot be sent to spawned workers). A loop written with
`comm` has its ranks' piles replaced by their mean at each `optimizer.step()`; a loop written for DDP gets
a model with `no_sync()`, and each backward() outside it replaces the rank's whole pile by the ranks' mean,
as DDP's all-reduce does."""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

import torch

from widgets.audit.instruments import Run, run_loop, watched_model
from widgets.audit.problems import AuditSetup, Problem, Regression, Tokens, _regression_batches, _token_batches, batch_key
from widgets.core.accumulation import windows
from widgets.core.time_limit import TimeLimit

WORLD_SIZES = (1, 2, 3, 4)
GRACE_S = 2.0  # how long past the time limit the ranks' threads are waited for


class RanksOutOfStep(RuntimeError):
    """The ranks did not meet at the same call: one all-reduced while another stepped, or one had ended."""


class _Exchange:
    """Where the ranks' threads meet, each meeting kept apart so a fast rank never overwrites a slow one's."""

    def __init__(self, world_size: int, deadline: float):
        self.world_size, self.deadline = world_size, deadline
        self._cond = threading.Condition()
        self._meetings: list[dict[int, tuple[str, torch.Tensor]]] = []
        self._count = [0] * world_size  # meetings each rank has come to
        self._ended: dict[int, str] = {}  # rank -> how it ended
        self.consequences: set[int] = set()  # ranks that raised only because another stopped

    def meet(self, rank: int, call: str, tensor: torch.Tensor) -> list[torch.Tensor]:
        with self._cond:
            m = self._count[rank]
            self._count[rank] += 1
            if m == len(self._meetings):
                self._meetings.append({})
            self._meetings[m][rank] = (call, tensor)
            self._cond.notify_all()
            while len(self._meetings[m]) < self.world_size:
                gone = [r for r, how in self._ended.items() if self._count[r] <= m]
                if gone:
                    self.consequences.add(rank)
                    raise RanksOutOfStep(f"rank {rank} waited at {call} for rank {gone[0]}, which "
                                         f"{self._ended[gone[0]]}: every rank must call optimizer.step() and "
                                         "comm.all_reduce() alike")
                left = self.deadline - time.monotonic()
                if left <= 0:
                    raise TimeLimit(f"rank {rank} waited at {call} for the other ranks past the time limit")
                self._cond.wait(min(left, 0.05))
            calls = {r: c for r, (c, _) in self._meetings[m].items()}
            if len(set(calls.values())) > 1:
                raise RanksOutOfStep("the ranks met at different calls: " + ", ".join(
                    f"rank {r} at {c}" for r, c in sorted(calls.items())) + "; every rank must call "
                    "optimizer.step() and comm.all_reduce() in the same order")
            return [self._meetings[m][r][1] for r in range(self.world_size)]

    def end(self, rank: int, how: str) -> None:
        with self._cond:
            self._ended[rank] = how
            self._cond.notify_all()


@dataclass
class Comm:
    """One rank's handle on the others: `rank`, `world_size`, and `all_reduce(tensor)` (a sum, in place)."""

    rank: int
    world_size: int
    _exchange: _Exchange = field(repr=False)

    def all_reduce(self, tensor: torch.Tensor, op=None) -> torch.Tensor:
        """Sum `tensor` over the ranks, in place, and return it (torch.distributed.all_reduce, SUM)."""
        if not isinstance(tensor, torch.Tensor):
            raise TypeError(f"comm.all_reduce takes a tensor, like torch.distributed.all_reduce; got "
                            f"{type(tensor).__name__}: wrap the count, torch.tensor(count)")
        if op is not None and "SUM" not in str(op).upper():
            raise ValueError(f"comm.all_reduce sums (op=ReduceOp.SUM or None), got op={op!r}")
        parts = self._exchange.meet(self.rank, "comm.all_reduce()", tensor.detach().clone())
        if len({tuple(p.shape) for p in parts}) > 1:
            raise RanksOutOfStep(f"the ranks all-reduced tensors of shapes {[tuple(p.shape) for p in parts]}")
        with torch.no_grad():
            tensor.copy_(sum(parts[1:], parts[0]))  # the same order on every rank: the same sum
        return tensor

    def mean_over_ranks(self, grad: torch.Tensor | None, weight: torch.Tensor, call: str = "optimizer.step()"
                        ) -> torch.Tensor:
        """The mean of the ranks' piles (a rank with none counts zeros): what DDP's all-reduce leaves."""
        pile = torch.zeros_like(weight) if grad is None else grad.detach().clone()
        parts = self._exchange.meet(self.rank, call, pile)
        return sum(parts[1:], parts[0]) / self.world_size


def rank_problems(setup: AuditSetup) -> tuple[list[Problem], Problem]:
    """One Problem per rank and the reference's of all: tokens with real-token counts unequal in every window,
    or regression with equal micro-batches on every rank. DDP form: each rank's truth is the ranks' mean."""
    K, num_batches, world_size, clip = setup.K, setup.N, setup.world_size, setup.clip_norm
    task = Tokens if setup.problem == "tokens" else Regression
    g = torch.Generator().manual_seed(0)
    rank_windows = windows(num_batches, K)
    while True:  # seeded, so the same draws each time; redraw the rare set where two ranks' token counts agree
        shares = [(_token_batches if task is Tokens else _regression_batches)(K, num_batches, clip, g)[0]
                  for _ in range(world_size)]
        counts = [[sum(task.items(batches[j][1]) for j in window) for batches in shares] for window in rank_windows]
        if task is Regression or all(len(set(c)) == world_size for c in counts):
            break
    global_items = tuple(sum(c) for c in counts)
    micro_items = tuple(sum(task.items(batches[j][1]) for batches in shares) for j in range(num_batches))
    b = len(shares[0][0][0])
    together = [shares[r][j] for window in rank_windows for r in range(world_size) for j in window]
    whole_windows = [range(w.start * world_size, w.stop * world_size) for w in rank_windows]
    whole = Problem(task, together, whole_windows, K * world_size, b, clip, setup.with_scheduler,
                    {batch_key(x): j for j, (x, _) in enumerate(together)})
    problems = [Problem(task, batches, rank_windows, K, b, clip, setup.with_scheduler,
                        {batch_key(x): j for j, (x, _) in enumerate(batches)}, world_size, r, global_items,
                        micro_items, whole if setup.ddp else None)
                for r, batches in enumerate(shares)]
    return problems, whole


def run_ranks(loop, problems: list[Problem], time_limit_s: float, ddp: bool = False
              ) -> tuple[list[Run], set[int], list[int]]:
    """`loop` once per rank, in threads: the runs, the ranks that raised only as another stopped, the ranks left.
    `ddp`: the loop takes no comm; its model syncs at each backward() outside `no_sync()`, as DDP's does."""
    world_size = len(problems)
    deadline = time.monotonic() + time_limit_s
    exchange = _Exchange(world_size, deadline)
    runs: list[Run | None] = [None] * world_size

    def rank_main(r: int) -> None:
        try:
            with torch.enable_grad():  # grad mode is per thread
                runs[r] = run_loop(loop, problems[r], time_limit_s, Comm(r, world_size, exchange), ddp)
        finally:
            run = runs[r]
            exchange.end(r, "ended" if run is None or run.error is None else "raised")

    threads = [threading.Thread(target=rank_main, args=(r,), name=f"audit-rank-{r}", daemon=True)
               for r in range(world_size)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=max(0.0, deadline - time.monotonic()) + GRACE_S)
    left = [r for r, t in enumerate(threads) if t.is_alive() or runs[r] is None]
    for r in left:  # inside a call Python cannot interrupt: its own model, stopped at its next line
        model = watched_model(problems[r])
        runs[r] = Run(model.tape, model.weight.detach().clone(), timed_out=True,
                      error=f"rank {r} was still running {GRACE_S:g} s past the time limit of {time_limit_s:g} s, "
                            "inside a call Python cannot interrupt (such as time.sleep)")
    return runs, set(exchange.consequences), left
