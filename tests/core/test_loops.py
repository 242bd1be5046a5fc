"""The classic mistakes' loops (widgets.core.loops), each against what its docstring says it does.

Oracles: the correct loop `train` on the same micro-batches, and plain autograd; each mistake must
change exactly what its `# BUG` line says (tests/core/test_mistakes.py holds that it changes
nothing else, and that the auditor names it).
"""
import pytest
import torch

from widgets.core import loops
from widgets.core.accumulation import make_model
from widgets.core.mistakes import MISTAKES

from tests.core.loop_support import mse
from tests.core.loop_support import applied as _applied
from tests.core.loop_support import micro_batches as _micro_batches


def _run(mistake=None, *, K=4, n=80, b=8, clip=None, warmup=0):
    """Train with `mistake`'s loop (None: `train`); returns the gradients the steps used, the rates, the log."""
    loop = loops.train if mistake is None else MISTAKES[mistake].loop
    model = make_model(seed=2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda u: min(1.0, (u + 1) / (warmup + 1)))
    used, rates = _applied(optimizer), []
    optimizer.register_step_pre_hook(lambda opt, args, kwargs: rates.append(opt.param_groups[0]["lr"]))
    with pytest.warns(UserWarning) if mistake == "scheduler_every_micro_step" else _nothing():
        logged = loop(model, optimizer, mse, _micro_batches(n, b), K, scheduler, max_norm=clip)
    return used, rates, logged


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_loss_not_divided_applies_k_times_the_mean():
    (right, *_), _, _ = _run()
    (wrong, *_), _, _ = _run("loss_not_divided")
    assert torch.allclose(wrong, 4 * right, rtol=1e-5, atol=1e-6)


def test_loss_divided_twice_applies_one_over_k():
    (right, *_), _, _ = _run()
    (wrong, *_), _, _ = _run("loss_divided_twice")
    assert torch.allclose(wrong, right / 4, rtol=1e-5, atol=1e-7)


def test_tail_divided_by_k_weighs_the_tail_m_over_k():
    right, _, _ = _run(n=80)  # 10 micro-batches: two full windows and a tail of 2
    wrong, _, _ = _run("tail_divided_by_k", n=80)
    assert all(torch.allclose(w, r, rtol=1e-5, atol=1e-7) for w, r in zip(wrong[:2], right[:2]))
    assert torch.allclose(wrong[2], right[2] * 2 / 4, rtol=1e-5, atol=1e-7)


def test_zero_grad_every_micro_step_keeps_only_the_last_micro_batch():
    (wrong, *_), _, _ = _run("zero_grad_every_micro_step")
    model = make_model(seed=2)
    inputs, targets = _micro_batches(80, 8)[3]
    last = torch.cat([g.reshape(-1) for g in torch.autograd.grad(mse(model(inputs), targets) / 4, list(model.parameters()))])
    assert torch.allclose(wrong, last, rtol=1e-5, atol=1e-7)


def test_step_every_micro_step_steps_k_times_per_update():
    right, _, _ = _run(n=64)
    wrong, _, _ = _run("step_every_micro_step", n=64)
    assert (len(right), len(wrong)) == (2, 8)


def test_forget_final_step_never_steps_the_tail():
    right, _, logged_right = _run(n=80)
    wrong, _, logged_wrong = _run("forget_final_step", n=80)
    assert (len(right), len(wrong), len(logged_wrong)) == (3, 2, 2)


def test_log_divided_loss_logs_k_times_too_small_and_trains_the_same():
    right, _, logged_right = _run(n=80)
    wrong, _, logged_wrong = _run("log_divided_loss", n=80)
    assert all(torch.equal(w, r) for w, r in zip(wrong, right))
    assert logged_wrong == pytest.approx([logged / 4 for logged in logged_right], rel=1e-6)


def test_clip_every_micro_step_clips_the_half_built_pile():
    (right, *_), _, _ = _run(clip=0.2)
    (wrong, *_), _, _ = _run("clip_every_micro_step", clip=0.2)
    assert float(wrong.norm()) <= 0.2 + 1e-6 and float(right.norm()) == pytest.approx(0.2, rel=1e-4)
    assert not torch.allclose(wrong, right, rtol=1e-3, atol=1e-4)  # same length, another direction


def test_scheduler_every_micro_step_advances_the_warmup_k_times_per_update():
    _, right, _ = _run(warmup=8, n=96)
    _, wrong, _ = _run("scheduler_every_micro_step", warmup=8, n=96)
    assert right == pytest.approx([0.1 * (u + 1) / 9 for u in range(3)])
    assert wrong == pytest.approx([0.1 * min(1, 4 * (u + 1) / 9) for u in range(3)])  # K - 1 extra steps before each update
