"""`train_loop`, the lab's general loop, and the loops a learner copies (`train`, the GPU recipe
`train_amp`): against plain big-batch autograd each is exact (a short last window, K, optimizer, clip,
schedule; tokens and a global count for `train_loop`), and each reads its batches as a stream. The
classic mistakes are their own loops (tests/core/test_loops.py)."""
import copy

import pytest
import torch

from widgets.core.accumulation import IGNORE_INDEX, make_model, real_tokens
from widgets.core import loops
from widgets.core.loops import train_loop

from tests.core.loop_support import X, Y, mse
from tests.core.loop_support import applied as _applied
from tests.core.loop_support import micro_batches as _micro_batches


def _weights(model) -> torch.Tensor:
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


OPTIMIZERS = {"sgd": lambda p: torch.optim.SGD(p, lr=0.1), "adamw": lambda p: torch.optim.AdamW(p, lr=0.01)}


def _trained(kind, optimizer_name, *, K=1, n=60, b=8, clip=None, warmup=0, **options):
    """`train_loop` (kind 'loop'), a loop of widgets.core.loops by name ('train', 'train_amp') or a plain
    big-batch loop written out (kind 'big') on the first n examples."""
    model = make_model(seed=2)
    optimizer = OPTIMIZERS[optimizer_name](model.parameters())
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda u: min(1.0, (u + 1) / (warmup + 1)))
    if kind == "loop":
        logged = train_loop(model, optimizer, mse, _micro_batches(n, b), K, scheduler, max_grad_norm=clip, **options)
        return _weights(model), logged
    if kind != "big":
        logged = getattr(loops, kind)(model, optimizer, mse, _micro_batches(n, b), K, scheduler, max_norm=clip)
        return _weights(model), logged
    logged = []
    for start in range(0, n, K * b):  # one pass and one step per K*b examples; the last batch may be short
        loss = mse(model(X[start : min(start + K * b, n)]), Y[start : min(start + K * b, n)])
        loss.backward()
        if clip is not None:
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        optimizer.step()
        optimizer.zero_grad()
        scheduler.step()
        logged.append(loss.item())
    return _weights(model), logged


@pytest.mark.parametrize("kind", ["loop", "train", "train_amp"])
@pytest.mark.parametrize("optimizer_name", ["sgd", "adamw"])
@pytest.mark.parametrize("K", [3, 4])
@pytest.mark.parametrize("clip, warmup", [(None, 0), (0.3, 3)])
def test_each_loop_is_the_big_batch_run(kind, optimizer_name, K, clip, warmup):
    # 60 examples in micro-batches of 8: the last micro-batch holds 4, the last window is short
    weights, logged = _trained(kind, optimizer_name, K=K, clip=clip, warmup=warmup)
    big_weights, big_logged = _trained("big", optimizer_name, K=K, clip=clip, warmup=warmup)
    assert torch.allclose(weights, big_weights, rtol=1e-5, atol=1e-6)
    assert logged == pytest.approx(big_logged, rel=1e-5)


def _token_batches():
    """Micro-batches of token sequences with different numbers of real (non-padding) tokens."""
    g = torch.Generator().manual_seed(0)
    batches = []
    for real in (5, 2, 7, 3, 6):
        inputs = torch.randint(0, 10, (2, 4), generator=g)
        targets = torch.randint(0, 10, (2, 4), generator=g).reshape(-1)
        targets[real:] = IGNORE_INDEX
        batches.append((inputs, targets))
    return batches


def _token_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Embedding(10, 6), torch.nn.Flatten(0, 1), torch.nn.Linear(6, 10))


def test_tokens_weighting_is_the_window_token_mean():
    batches, ce = _token_batches(), torch.nn.functional.cross_entropy  # mean over real tokens
    model = _token_model()
    reference = copy.deepcopy(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    used = _applied(optimizer)
    logged = train_loop(model, optimizer, ce, batches, 3, items=real_tokens)
    for update, window in enumerate((batches[:3], batches[3:])):
        inputs, targets = torch.cat([i for i, _ in window]), torch.cat([t for _, t in window])
        loss = ce(reference(inputs), targets)  # one pass: the mean over the window's real tokens
        grads = torch.autograd.grad(loss, list(reference.parameters()))
        assert torch.allclose(used[update], torch.cat([g.reshape(-1) for g in grads]), rtol=1e-5, atol=1e-7)
        assert logged[update] == pytest.approx(loss.item(), rel=1e-6)
        with torch.no_grad():  # the same SGD step, by hand
            for p, g in zip(reference.parameters(), grads):
                p -= 0.1 * g


def test_window_items_as_a_global_count_makes_two_ranks_one_big_batch():
    """Two ranks each hold half of every micro-batch; normalised by the tokens of both, their piles add
    up to the gradient of the mean over all tokens (what an all-reduce of the piles then gives)."""
    batches, ce = _token_batches()[:2], torch.nn.functional.cross_entropy
    ranks = [[(i[r : r + 1], t[4 * r : 4 * r + 4]) for i, t in batches] for r in (0, 1)]
    everywhere = sum(real_tokens(t) for _, t in batches)  # the count across ranks
    piles, model = [], _token_model()
    for rank in ranks:
        copy_ = copy.deepcopy(model)
        optimizer = torch.optim.SGD(copy_.parameters(), lr=0.1)
        used = _applied(optimizer)
        train_loop(copy_, optimizer, ce, rank, 2, items=real_tokens, window_items=lambda window: everywhere)
        piles.append(used[0])
    inputs, targets = torch.cat([i for i, _ in batches]), torch.cat([t for _, t in batches])
    grad = torch.cat([g.reshape(-1) for g in torch.autograd.grad(ce(model(inputs), targets), list(model.parameters()))])
    assert torch.allclose(piles[0] + piles[1], grad, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("name", ["train", "train_amp", "train_loop", "forget_final_step"])
@pytest.mark.parametrize("K", [3, 4])
def test_a_loop_reads_one_window_ahead_of_its_updates_never_the_whole_stream(name, K):
    """Each loop takes its windows from an iterator: when update u is made it has read u+1 windows (K
    micro-batches each, the tail fewer), never the rest of the stream, as list(batches) would."""
    batches, read = _micro_batches(60, 8), []  # 8 micro-batches: at K = 3 the last window holds 2

    def stream():
        for batch in batches:
            read.append(batch)
            yield batch

    model = make_model(seed=2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    at_step = []
    optimizer.register_step_pre_hook(lambda opt, args, kwargs: at_step.append(len(read)))
    getattr(loops, name)(model, optimizer, mse, stream(), K)
    full = len(batches) // K
    expected = [min((u + 1) * K, len(batches)) for u in range(-(-len(batches) // K))]
    assert at_step == (expected[:full] if name == "forget_final_step" else expected)
