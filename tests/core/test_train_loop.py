"""`train_loop`, the lab's one correct loop: the notebook shows its exact source; against plain
big-batch autograd it is exact (tail, K, optimizer, clip, schedule, tokens, a global count, a
GradScaler); each bug switch changes exactly what its comment says."""
import copy
import functools
import inspect
import json
from pathlib import Path

import pytest
import torch

from widgets.core.accumulation import make_model, make_regression_data
from widgets.core.config import BUGS
from widgets.core.loop import bug_lines, train_loop
from widgets.core.shared import IGNORE_INDEX, real_tokens

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "developer_2_training_loop.ipynb"
mse = torch.nn.functional.mse_loss
X, Y = make_regression_data(200, seed=4)


def test_the_notebook_cell_is_the_package_source():
    cells = json.loads(NOTEBOOK.read_text())["cells"]
    sources = ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]
    defining = [s for s in sources if "def train_loop(" in s]
    assert defining == [inspect.getsource(train_loop).rstrip("\n")]


def _micro_batches(n: int, b: int) -> list:
    return [(X[i : min(i + b, n)], Y[i : min(i + b, n)]) for i in range(0, n, b)]


def _applied(optimizer) -> list[torch.Tensor]:
    """The flat gradient each optimizer.step() uses, recorded by a pre-hook."""
    used = []
    optimizer.register_step_pre_hook(lambda opt, args, kwargs: used.append(
        torch.cat([p.grad.reshape(-1).clone() for g in opt.param_groups for p in g["params"]])))
    return used


def _weights(model) -> torch.Tensor:
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


OPTIMIZERS = {"sgd": lambda p: torch.optim.SGD(p, lr=0.1), "adamw": lambda p: torch.optim.AdamW(p, lr=0.01)}


def _trained(kind, optimizer_name, *, K=1, n=60, b=8, clip=None, warmup=0, **options):
    """`train_loop` (kind 'loop') or a plain big-batch loop written out (kind 'big') on the first n examples."""
    model = make_model(seed=2)
    optimizer = OPTIMIZERS[optimizer_name](model.parameters())
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda u: min(1.0, (u + 1) / (warmup + 1)))
    if kind == "loop":
        logged = train_loop(model, optimizer, mse, _micro_batches(n, b), K, scheduler, max_grad_norm=clip, **options)
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


@pytest.mark.parametrize("optimizer_name", ["sgd", "adamw"])
@pytest.mark.parametrize("K", [3, 4])
@pytest.mark.parametrize("clip, warmup", [(None, 0), (0.3, 3)])
def test_train_loop_is_the_big_batch_run(optimizer_name, K, clip, warmup):
    # 60 examples in micro-batches of 8: the last micro-batch holds 4, the last window is short
    weights, logged = _trained("loop", optimizer_name, K=K, clip=clip, warmup=warmup)
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


def test_a_grad_scaler_on_cpu_gives_the_same_updates_as_none():
    plain, logged = _trained("loop", "sgd", K=4, clip=0.3)
    scaler = torch.amp.GradScaler("cpu", enabled=True, init_scale=2.0**10)
    scaled, scaled_logged = _trained("loop", "sgd", K=4, clip=0.3, scaler=scaler)
    assert torch.allclose(plain, scaled, rtol=1e-6, atol=1e-7) and scaled_logged == pytest.approx(logged, rel=1e-6)
    assert scaler.get_scale() == 2.0**10  # updated once per update, never halved


# --- each bug switch does what its comment says ---------------------------------------------------

def _run(bugs=(), *, K=4, n=80, b=8, clip=None, warmup=0):
    """Train with `bugs`; returns the gradients the steps used, the steps, the rates, the log."""
    model = make_model(seed=2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda u: min(1.0, (u + 1) / (warmup + 1)))
    used, rates = _applied(optimizer), []
    optimizer.register_step_pre_hook(lambda opt, args, kwargs: rates.append(opt.param_groups[0]["lr"]))
    with pytest.warns(UserWarning) if "scheduler_every_micro_step" in bugs else _nothing():
        logged = train_loop(model, optimizer, mse, _micro_batches(n, b), K, scheduler, max_grad_norm=clip, bugs=bugs)
    return used, rates, logged


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_loss_not_divided_applies_k_times_the_mean():
    (right, *_), _, _ = _run()
    (wrong, *_), _, _ = _run({"loss_not_divided"})
    assert torch.allclose(wrong, 4 * right, rtol=1e-5, atol=1e-6)


def test_loss_divided_twice_applies_one_over_k():
    (right, *_), _, _ = _run()
    (wrong, *_), _, _ = _run({"loss_divided_twice"})
    assert torch.allclose(wrong, right / 4, rtol=1e-5, atol=1e-7)


def test_tail_divided_by_k_weighs_the_tail_m_over_k():
    right, _, _ = _run(n=80)  # 10 micro-batches: two full windows and a tail of 2
    wrong, _, _ = _run({"tail_divided_by_k"}, n=80)
    assert all(torch.allclose(w, r, rtol=1e-5, atol=1e-7) for w, r in zip(wrong[:2], right[:2]))
    assert torch.allclose(wrong[2], right[2] * 2 / 4, rtol=1e-5, atol=1e-7)


def test_zero_grad_every_micro_step_keeps_only_the_last_micro_batch():
    (wrong, *_), _, _ = _run({"zero_grad_every_micro_step"})
    model = make_model(seed=2)
    inputs, targets = _micro_batches(80, 8)[3]
    last = torch.cat([g.reshape(-1) for g in torch.autograd.grad(mse(model(inputs), targets) / 4, list(model.parameters()))])
    assert torch.allclose(wrong, last, rtol=1e-5, atol=1e-7)


def test_step_every_micro_step_steps_k_times_per_update():
    right, _, _ = _run(n=64)
    wrong, _, _ = _run({"step_every_micro_step"}, n=64)
    assert (len(right), len(wrong)) == (2, 8)


def test_forget_final_step_never_steps_the_tail():
    right, _, logged_right = _run(n=80)
    wrong, _, logged_wrong = _run({"forget_final_step"}, n=80)
    assert (len(right), len(wrong), len(logged_wrong)) == (3, 2, 2)


def test_log_divided_loss_logs_k_times_too_small_and_trains_the_same():
    right, _, logged_right = _run(n=80)
    wrong, _, logged_wrong = _run({"log_divided_loss"}, n=80)
    assert all(torch.equal(w, r) for w, r in zip(wrong, right))
    assert logged_wrong == pytest.approx([logged_right[0] / 4, logged_right[1] / 4, logged_right[2] / 2], rel=1e-6)


def test_clip_every_micro_step_clips_the_half_built_pile():
    (right, *_), _, _ = _run(clip=0.2)
    (wrong, *_), _, _ = _run({"clip_every_micro_step"}, clip=0.2)
    assert float(wrong.norm()) <= 0.2 + 1e-6 and float(right.norm()) == pytest.approx(0.2, rel=1e-4)
    assert not torch.allclose(wrong, right, rtol=1e-3, atol=1e-4)  # same length, another direction


def test_scheduler_every_micro_step_advances_the_warmup_k_times_per_update():
    _, right, _ = _run(warmup=8, n=96)
    _, wrong, _ = _run({"scheduler_every_micro_step"}, warmup=8, n=96)
    assert right == pytest.approx([0.1 * (u + 1) / 9 for u in range(3)])
    assert wrong == pytest.approx([0.1 * min(1, 4 * (u + 1) / 9) for u in range(3)])  # K - 1 extra steps before each update


def test_every_bug_has_its_if_in_train_loop():
    for name in BUGS:
        lines = bug_lines(name)
        assert lines.startswith(f'if "{name}" in bugs') and "# BUG" in lines, name
    assert "once, the completed pile" in bug_lines("clip_every_micro_step")  # the update's clip it turns off


def test_bug_names_are_checked():
    with pytest.raises(ValueError, match="bugs"):
        bug_lines("no_such_bug")
    with pytest.raises(TypeError, match="name"):
        bug_lines(["loss_not_divided"])
    with pytest.raises(ValueError, match="bugs"):
        train_loop(make_model(), None, mse, [], 2, bugs={"no_such_bug"})


def test_a_partial_train_loop_with_a_bug_is_a_loop_the_auditor_can_call():
    loop = functools.partial(train_loop, bugs={"loss_not_divided"})
    (wrong, *_), _, _ = _run({"loss_not_divided"})
    model = make_model(seed=2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    used = _applied(optimizer)
    loop(model, optimizer, mse, _micro_batches(80, 8), 4)
    assert torch.equal(used[0], wrong)
