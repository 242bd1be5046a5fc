"""The ground truth of round_four_loops.py, proved without the auditor.

Each loop runs on a small seeded problem shaped as the auditor's (the last micro-batch short, token
counts unequal, two ranks as DDP runs them) beside the big batch: per window, one backward of the
mean loss over the window's examples (every rank's), then the same optimizer step. A right loop
lands on the big batch's weights under plain SGD, SGD with momentum and Adam, on a linear model and
a small MLP; a wrong one shows what its record says (`shows`) by a margin far above rounding.
"""
from __future__ import annotations

import linecache
import sys
import threading
import time
import weakref

import pytest
import torch
import torch.nn.functional as F

from tests.audit.round_four_loops import HANGS, LOG, LOOPS, MEMORY, MOMENTUM, WEIGHTS, IGNORE_INDEX, Case, Setting
from widgets.core.mistakes import EVERY_MISTAKE

OPTIMIZERS = {
    "sgd": lambda params: torch.optim.SGD(params, lr=0.05),
    "momentum": lambda params: torch.optim.SGD(params, lr=0.05, momentum=0.9),
    "adam": lambda params: torch.optim.Adam(params, lr=0.01),
}
VOCAB, LENGTH = 5, 8


def regression_batches(setting: Setting, seed: int, clip_norm: float | None, rank: int = 0) -> list:
    b = setting.K + 1
    sizes = [b] * (setting.num_batches - 1) + [b // 2]  # the last micro-batch short, as drop_last=False leaves it
    g = torch.Generator().manual_seed(1000 * seed + rank)
    x = torch.randn(sum(sizes), 3, generator=g, dtype=torch.float64)
    y = x @ torch.tensor([[1.5], [-2.0], [0.5]], dtype=torch.float64) + 0.5 * torch.randn(sum(sizes), 1, generator=g,
                                                                                          dtype=torch.float64)
    return list(zip(x.split(sizes), (y * (20 if clip_norm else 1)).split(sizes)))  # large enough to be clipped


def token_batches(setting: Setting, seed: int, clip_norm: float | None, rank: int = 0) -> list:
    g = torch.Generator().manual_seed(1000 * seed + rank)
    batches = []
    for j in range(setting.num_batches):
        rows = 3 if j < setting.num_batches - 1 else 1
        lengths = torch.randint(1, LENGTH // 2 + 1, (rows,), generator=g) + (0 if (j + rank) % 2 else LENGTH // 2)
        real = torch.arange(LENGTH) < lengths.unsqueeze(1)
        inputs = torch.randint(0, VOCAB, (rows, LENGTH), generator=g)
        batches.append((inputs, torch.where(real, torch.randint(0, VOCAB, (rows, LENGTH), generator=g), IGNORE_INDEX)))
    return batches


def token_loss(logits, targets, reduction="mean"):
    return F.cross_entropy(logits.reshape(-1, VOCAB), targets.reshape(-1), ignore_index=IGNORE_INDEX,
                           reduction=reduction)


PROBLEMS = {  # batches, models (name -> builder), loss_fn, a window's loss summed over its items, its items
    "regression": (regression_batches,
                   {"linear": lambda: torch.nn.Linear(3, 1, bias=False),
                    "mlp": lambda: torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 1))},
                   torch.nn.MSELoss(), lambda out, y: F.mse_loss(out, y, reduction="sum"), len),
    "tokens": (token_batches,
               {"embedding": lambda: torch.nn.Embedding(VOCAB, VOCAB),
                "mlp": lambda: torch.nn.Sequential(torch.nn.Embedding(VOCAB, 4), torch.nn.Linear(4, VOCAB))},
               token_loss, lambda out, y: token_loss(out, y, "sum"), lambda y: int((y != IGNORE_INDEX).sum())),
}


def new_model(case: Case, kind: str, seed: int) -> torch.nn.Module:
    model = PROBLEMS[case.problem][1][kind]().double()
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(0.5 * torch.randn(p.shape, generator=g, dtype=torch.float64))
    return model


def flat(model: torch.nn.Module) -> torch.Tensor:
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


def big_batch(case: Case, setting: Setting, kind: str, optimizer: str, seed: int = 0):
    """From first principles: per window, the mean loss over every rank's examples, one backward, one step."""
    make, _, _, summed, items = PROBLEMS[case.problem]
    ranks = [make(setting, seed, case.clip_norm, r) for r in range(setting.world_size)]
    model = new_model(case, kind, seed)
    opt = OPTIMIZERS[optimizer](model.parameters())
    K, means = setting.K, []
    for start in range(0, setting.num_batches, K):
        window = [batch for batches in ranks for batch in batches[start : start + K]]
        loss = sum(summed(model(x), y) for x, y in window) / sum(items(y) for _, y in window)
        loss.backward()
        means.append(loss.item())
        if case.clip_norm is not None:
            torch.nn.utils.clip_grad_norm_(model.parameters(), case.clip_norm)
        opt.step()
        opt.zero_grad()
    return flat(model), means


class Exchange:
    """Where two rank threads meet: the sum of a tensor over the ranks, the same on each."""

    def __init__(self, world_size: int):
        self.world_size, self.slots = world_size, [None] * world_size
        self.barrier = threading.Barrier(world_size, timeout=20)  # a rank that never comes breaks it: no hang

    def sum(self, rank: int, tensor: torch.Tensor) -> torch.Tensor:
        self.slots[rank] = tensor.detach().clone()
        self.barrier.wait()
        total = sum(self.slots[1:], self.slots[0])
        self.barrier.wait()  # every rank has read the slots before any writes the next
        return total


class Comm:
    def __init__(self, rank: int, exchange: Exchange):
        self.rank, self.world_size, self._exchange = rank, exchange.world_size, exchange

    def all_reduce(self, tensor, op=None):
        with torch.no_grad():
            tensor.copy_(self._exchange.sum(self.rank, tensor))
        return tensor


def averaged_at_step(optimizer, model, exchange: Exchange, rank: int):
    """The optimizer with DDP's mean over ranks of each .grad (none counts zeros) before every step."""
    step = optimizer.step

    def ddp_step(closure=None):
        for p in model.parameters():
            p.grad = exchange.sum(rank, torch.zeros_like(p) if p.grad is None else p.grad) / exchange.world_size
        return step(closure)

    optimizer.step = ddp_step
    return optimizer


def run(case: Case, setting: Setting, kind: str, optimizer: str, seed: int = 0):
    """The loop's final weights (rank 0's) and what it returned."""
    make, _, loss_fn, _, _ = PROBLEMS[case.problem]
    if case.family == "compiled":
        torch.compiler.reset()  # each fresh model compiled afresh, not a guard failure away from eager
    W = setting.world_size
    if W == 1:
        model = new_model(case, kind, seed)
        returned = case.loop(model, OPTIMIZERS[optimizer](model.parameters()), loss_fn,
                             make(setting, seed, case.clip_norm), setting.K)
        return flat(model), returned
    exchange, models, errors = Exchange(W), [new_model(case, kind, seed) for _ in range(W)], []

    def rank_main(r):
        try:
            opt = averaged_at_step(OPTIMIZERS[optimizer](models[r].parameters()), models[r], exchange, r)
            case.loop(models[r], opt, loss_fn, make(setting, seed, case.clip_norm, r), setting.K,
                      comm=Comm(r, exchange))
        except BaseException as error:  # noqa: BLE001 - raised below, in the test's thread
            errors.append(error)
            exchange.barrier.abort()

    threads = [threading.Thread(target=rank_main, args=(r,), daemon=True) for r in range(W)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors and not any(t.is_alive() for t in threads), errors
    assert torch.equal(flat(models[0]), flat(models[1])), "DDP's ranks end on the same weights"
    return flat(models[0]), None


def far(a: torch.Tensor, b: torch.Tensor) -> bool:
    """A difference far above float64 rounding (and float32's): a verdict that no CPU's rounding changes."""
    return float((a - b).abs().max()) > 1e-4 * float(b.abs().max())


def close(a: torch.Tensor, b: torch.Tensor, rtol: float) -> bool:
    return torch.allclose(a, b, rtol=rtol, atol=rtol * float(b.abs().max()))


def setting_id(s: Setting) -> str:
    return f"K{s.K}-{'tail' if s.tail else 'no_tail'}" + (f"-ranks{s.world_size}" if s.world_size > 1 else "")


CASES = [pytest.param(case, s, id=f"{case.name}-{setting_id(s)}",  # compiling takes seconds a model
                      marks=[pytest.mark.slow] if case.family == "compiled" else [])
         for case in LOOPS for s in case.settings if case.shows != HANGS or case.correct]


def check(case: Case, setting: Setting, kinds: list[str], optimizers: tuple[str, ...]) -> None:
    for kind in kinds:
        if case.correct:
            for optimizer in optimizers:
                (mine, returned), (truth, means) = run(case, setting, kind, optimizer), big_batch(
                    case, setting, kind, optimizer)
                assert close(mine, truth, case.rtol), (kind, optimizer, mine, truth)
                if returned is not None:
                    assert len(returned) == len(means) and close(torch.tensor(returned), torch.tensor(means), 1e-9)
            continue
        (sgd, returned), (truth, means) = run(case, setting, kind, "sgd"), big_batch(case, setting, kind, "sgd")
        if case.shows == WEIGHTS:
            assert far(sgd, truth), (kind, sgd, truth)
            assert far(run(case, setting, kind, "momentum")[0], big_batch(case, setting, kind, "momentum")[0])
            continue
        assert close(sgd, truth, 1e-10), "its updates are the big batch's under plain SGD"
        if case.shows == MOMENTUM:
            for optimizer in ("momentum", "adam"):
                assert far(run(case, setting, kind, optimizer)[0], big_batch(case, setting, kind, optimizer)[0])
        if case.shows == LOG:
            assert returned is not None and len(returned) == setting.num_batches != len(means), "one per micro-batch"


@pytest.mark.parametrize("case, setting", CASES)
def test_each_loop_against_the_big_batch(case: Case, setting: Setting):
    """The auditor's model (linear, or an embedding for tokens), plain SGD and momentum."""
    check(case, setting, list(PROBLEMS[case.problem][1])[:1], ("sgd", "momentum"))


@pytest.mark.slow
@pytest.mark.parametrize("case, setting", CASES)
def test_each_loop_beyond_the_example(case: Case, setting: Setting):
    """A small MLP too, and Adam: the truth is not the linear model's or plain SGD's alone."""
    check(case, setting, list(PROBLEMS[case.problem][1]), tuple(OPTIMIZERS))


def test_the_whole_windows_loop_makes_two_updates_where_the_big_batch_makes_three():
    case = next(c for c in LOOPS if c.name == "nanogpt_whole_windows")
    for setting in case.settings:
        model, steps = new_model(case, "linear", 0), []
        optimizer = OPTIMIZERS["sgd"](model.parameters())
        optimizer.register_step_post_hook(lambda *_, steps=steps: steps.append(1))
        case.loop(model, optimizer, torch.nn.MSELoss(), regression_batches(setting, 0, None), setting.K)
        assert (len(steps), -(-setting.num_batches // setting.K)) == (2, 3)


def test_summed_r_drop_losses_make_every_update_twice_the_big_batch_s():
    case = next(c for c in LOOPS if c.name == "rdrop_summed")
    make, _, loss_fn, summed, items = PROBLEMS[case.problem]
    for setting in case.settings:
        batches, model, steps = make(setting, 0, None), new_model(case, "mlp", 0), []
        optimizer = OPTIMIZERS["sgd"](model.parameters())
        optimizer.register_step_pre_hook(lambda *_, steps=steps, model=model: steps.append(
            [(p.detach().clone(), p.grad.clone()) for p in model.parameters()]))
        case.loop(model, optimizer, loss_fn, batches, setting.K)
        for u, step in enumerate(steps):  # the big batch's gradient at the weights this step started from
            at = new_model(case, "mlp", 0)
            with torch.no_grad():
                for p, (weight, _) in zip(at.parameters(), step):
                    p.copy_(weight)
            window = batches[u * setting.K : (u + 1) * setting.K]
            (sum(summed(at(x), y) for x, y in window) / sum(items(y) for _, y in window)).backward()
            for p, (_, pile) in zip(at.parameters(), step):
                assert torch.allclose(pile, 2 * p.grad, rtol=1e-10, atol=1e-12)


def test_every_family_has_a_right_and_a_wrong_form_and_known_names():
    families = {case.family for case in LOOPS}
    for family in families:
        assert {case.correct for case in LOOPS if case.family == family} == {True, False}, family
    for case in LOOPS:
        assert (case.expected == frozenset()) == case.correct, case.name
        assert case.expected is None or case.expected <= set(EVERY_MISTAKE), case.name
    assert len({case.name for case in LOOPS}) == len(LOOPS)


def peak_saved_tensors(case: Case, setting: Setting) -> int:
    """The most tensors saved for backward alive at once while the loop runs (one graph's, or K graphs')."""
    alive = [0, 0]  # now, the most

    class Saved:
        __slots__ = ("tensor", "__weakref__")

    def freed():
        alive[0] -= 1

    def pack(tensor):
        saved = Saved()
        saved.tensor = tensor
        alive[0] += 1
        alive[1] = max(alive)
        weakref.finalize(saved, freed)  # when the graph lets its saved tensor go
        return saved

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda saved: saved.tensor):
        run(case, setting, "linear", "sgd")
    return alive[1]


MEMORY_CASES = [pytest.param(case, tail, id=f"{case.name}-{'tail' if tail else 'no_tail'}")
                for case in LOOPS if case.family in ("graphs", "rdrop") for tail in (True, False)]


@pytest.mark.parametrize("case, tail", MEMORY_CASES)
def test_graphs_kept_alive_only_where_memory_grows_with_k(case: Case, tail: bool):
    three, four = (peak_saved_tensors(case, Setting(K, tail)) for K in (3, 4))
    assert (four > three) == (case.shows == MEMORY and not case.correct), (three, four)


@pytest.mark.parametrize("case, setting", [pytest.param(c, s, id=f"{c.name}-{setting_id(s)}") for c in LOOPS
                                           for s in c.settings if c.shows == HANGS and not c.correct])
def test_a_loop_that_waits_for_ever_does_not_end(case: Case, setting: Setting):
    batches = regression_batches(setting, 0, None)
    model = new_model(case, "linear", 0)
    thread = threading.Thread(target=case.loop, args=(model, OPTIMIZERS["sgd"](model.parameters()),
                                                      torch.nn.MSELoss(), batches, setting.K), daemon=True)
    thread.start()
    deadline = time.monotonic() + 20  # it may be slow to get there on a loaded machine; waiting is what is proved
    while True:
        thread.join(timeout=0.5)
        assert thread.is_alive(), "it ended: nothing made it wait"
        frame = sys._current_frames()[thread.ident]
        while frame is not None and frame.f_code is not case.loop.__code__:
            frame = frame.f_back
        line = linecache.getline(frame.f_code.co_filename, frame.f_lineno) if frame is not None else ""
        if "q.get()" in line and frame.f_locals["q"].empty() or time.monotonic() > deadline:
            break
    at = frame.f_lineno if frame is not None else None
    thread.join(timeout=0.5)
    waits = thread.is_alive() and frame.f_lineno == at and frame.f_locals["q"].empty()  # still there, still empty
    # let it end: hand its own queue the micro-batch it waits for, until it has had enough
    while thread.is_alive():
        frame.f_locals["q"].put((len(batches) - 1, batches[-1]))
        thread.join(timeout=0.1)
    assert "q.get()" in line and waits, f"it waits at its own q.get(), with nothing left to get: {line.strip()!r}"
