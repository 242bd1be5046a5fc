"""The auditor's RL-loss problem: -A log p over completions, normalised by the window's completion tokens.

Each loop below is written out in full, the way a learner writes it; the truth is plain autograd
on the whole window (DAPO's normaliser), never the auditor's own arithmetic.
"""
import pytest
import torch

from widgets.audit import audit_training_loop
from widgets.audit.instruments import run_loop
from widgets.audit.problems import (ACTIONS, COMPLETION_LENGTH, FEATURES, GROUP_SIZE, AuditSetup, Completions,
                                    completion_tokens, make_problem, policy_gradient_loss)
from widgets.core.loops import train_loop
from widgets.core.accumulation import IGNORE_INDEX


def window_gradient(weight, window):
    """The gradient of the window's summed -A log p over all its completion tokens, by plain autograd."""
    w = weight.detach().clone().requires_grad_(True)
    x = torch.cat([b[0] for b in window])
    y = Completions(torch.cat([b[1].tokens for b in window]), torch.cat([b[1].advantages for b in window]))
    logp = torch.nn.functional.linear(x, w).log_softmax(-1)
    taken = logp.gather(-1, y.tokens.clamp(min=0).unsqueeze(-1)).squeeze(-1)
    loss = -(y.advantages.unsqueeze(1) * taken)[y.tokens != IGNORE_INDEX].sum() / int((y.tokens != IGNORE_INDEX).sum())
    (grad,) = torch.autograd.grad(loss, w)
    return grad.reshape(-1)


# ----------------------------------------------------------------------------- right loops


def dapo_window(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    """Sum -A log p over the tokens; divide by the window's completion tokens, counted before the first backward."""
    logged = []
    for start in range(0, len(batches), accumulation_steps):
        window = batches[start : start + accumulation_steps]
        tokens = sum(int(y.mask.sum()) for _, y in window)
        total = 0.0
        for x, y in window:
            loss = loss_fn(model(x), y, reduction="sum")
            (loss / tokens).backward()
            total += loss.item()
        optimizer.step()
        optimizer.zero_grad()
        logged.append(total / tokens)
    return logged


def mean_reweighted(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    """The micro-batch's token mean, weighted by its share of the window's completion tokens."""
    n = len(batches)
    for i, (x, y) in enumerate(batches):
        start = i - i % accumulation_steps
        window = batches[start : min(start + accumulation_steps, n)]
        share = completion_tokens(y) / sum(completion_tokens(t) for _, t in window)
        (loss_fn(model(x), y) * share).backward()
        if (i + 1) % accumulation_steps == 0 or i + 1 == n:
            optimizer.step()
            optimizer.zero_grad()


def lab_loop(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    return train_loop(model, optimizer, loss_fn, batches, accumulation_steps, scheduler, items=completion_tokens)


# ----------------------------------------------------------------------------- wrong loops


def bnpo(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    n = len(batches)
    for i, (x, y) in enumerate(batches):
        loss = loss_fn(model(x), y)  # BUG: this micro-batch's token mean ...
        (loss / accumulation_steps).backward()  # ... averaged over the micro-batches
        if (i + 1) % accumulation_steps == 0 or i + 1 == n:
            optimizer.step()
            optimizer.zero_grad()


def divided_by_group_twice(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    for start in range(0, len(batches), accumulation_steps):
        window = batches[start : start + accumulation_steps]
        tokens = sum(int(y.mask.sum()) for _, y in window)
        for x, y in window:
            (loss_fn(model(x), y, reduction="sum") / tokens / GROUP_SIZE).backward()  # BUG: / G once more
        optimizer.step()
        optimizer.zero_grad()


def window_count_then_divided_by_k(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    """ms-swift issue #10117: the window's token count, then the trainer's / gradient_accumulation_steps."""
    for start in range(0, len(batches), accumulation_steps):
        window = batches[start : start + accumulation_steps]
        tokens = sum(int(y.mask.sum()) for _, y in window)
        for x, y in window:
            (loss_fn(model(x), y, reduction="sum") / tokens / accumulation_steps).backward()  # BUG: / K again
        optimizer.step()
        optimizer.zero_grad()


def padding_counted(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    for start in range(0, len(batches), accumulation_steps):
        window = batches[start : start + accumulation_steps]
        positions = sum(y.tokens.numel() for _, y in window)  # BUG: the padding counted
        for x, y in window:
            (loss_fn(model(x), y, reduction="sum") / positions).backward()
        optimizer.step()
        optimizer.zero_grad()


def zero_grad_every_micro_step(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    for start in range(0, len(batches), accumulation_steps):
        window = batches[start : start + accumulation_steps]
        tokens = sum(completion_tokens(y) for _, y in window)
        for x, y in window:
            optimizer.zero_grad()  # BUG: empties the pile inside the update
            (loss_fn(model(x), y, reduction="sum") / tokens).backward()
        optimizer.step()


def forget_final_step(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    for start in range(0, len(batches), accumulation_steps):
        window = batches[start : start + accumulation_steps]
        tokens = sum(completion_tokens(y) for _, y in window)
        for x, y in window:
            (loss_fn(model(x), y, reduction="sum") / tokens).backward()
        if len(window) == accumulation_steps:  # BUG: the uneven final window never steps
            optimizer.step()
            optimizer.zero_grad()


RIGHT = [dapo_window, mean_reweighted, lab_loop]
WRONG = [
    (bnpo, {"per_micro_batch_normaliser"}),
    (divided_by_group_twice, {"divided_by_group_twice"}),
    (window_count_then_divided_by_k, {"loss_divided_twice"}),
    (padding_counted, {"padding_counted"}),
    (zero_grad_every_micro_step, {"zero_grad_every_micro_step"}),
    (forget_final_step, {"forget_final_step"}),
]


@pytest.mark.parametrize("loop", RIGHT, ids=[loop.__name__ for loop in RIGHT])
@pytest.mark.parametrize("K", [2, 3])
def test_a_window_normalised_loop_passes(loop, K):
    report = audit_training_loop(loop, K, problem="rl")
    assert report.matches_reference, str(report)
    assert report.update_ratios == pytest.approx([1.0] * len(report.update_ratios))


@pytest.mark.parametrize("loop, names", WRONG, ids=[loop.__name__ for loop, _ in WRONG])
@pytest.mark.parametrize("K", [2, 3])
def test_each_wrong_loop_is_named_alone(loop, names, K):
    report = audit_training_loop(loop, K, problem="rl")
    assert report.mistakes == names, str(report)
    assert len(report.findings) == len(names)


def test_a_double_division_by_the_group_is_g_times_too_small():
    report = audit_training_loop(divided_by_group_twice, 3, problem="rl")
    assert report.update_ratios == pytest.approx([1 / GROUP_SIZE] * 3)
    assert "completion tokens; the window holds" in report.findings[0]
    assert "Fix: divide once, by the completion tokens of the window" in report.findings[0]


def test_the_report_speaks_of_completions_and_checks_the_log():
    report = audit_training_loop(dapo_window, 3, problem="rl")
    assert "micro-batches of 3 completions (the last of 1)" in str(report)
    assert report.log_checked


@pytest.mark.parametrize("K, num_batches", [(2, 5), (3, 7), (3, 6)])
def test_the_right_loop_steps_with_the_window_gradient_of_plain_autograd(K, num_batches):
    problem = make_problem(AuditSetup(K, num_batches, None, False, "rl"))
    run = run_loop(dapo_window, problem)
    assert run.error is None and len(run.tape.steps) == len(problem.windows)
    for step, g in zip(run.tape.steps, problem.windows):
        big = window_gradient(step.weight, [problem.batches[j] for j in g])
        assert torch.allclose(step.grad, big, rtol=1e-10, atol=1e-12)


def test_per_micro_batch_means_are_not_the_window_mean():
    problem = make_problem(AuditSetup(3, 6, None, False, "rl"))
    window, w = problem.batches[:3], torch.zeros(ACTIONS, FEATURES, dtype=torch.float64, requires_grad=True)
    averaged = sum(policy_gradient_loss(torch.nn.functional.linear(x, w), y) for x, y in window) / 3
    (grad,) = torch.autograd.grad(averaged, w)
    assert not torch.allclose(grad.reshape(-1), window_gradient(w, window), rtol=1e-5, atol=1e-8)


def test_completions_are_padded_with_varied_lengths_and_group_normalised_advantages():
    problem = make_problem(AuditSetup(3, 7, None, False, "rl"))
    for j, (x, y) in enumerate(problem.batches):
        rows = 3 if j < 6 else 1
        assert x.shape == (rows, COMPLETION_LENGTH, FEATURES) and y.tokens.shape == (rows, COMPLETION_LENGTH)
        assert (y.mask[:, 0]).all() and (y.mask.int().diff(dim=1) <= 0).all()  # tokens first, then padding
        assert (x[~y.mask] == 0).all() and len(y) == rows
    for g in problem.windows:
        if len(g) > 1:
            assert len({problem.items(j) for j in g}) > 1
    first_group = torch.cat([y.advantages for _, y in problem.batches[:2]])  # 6 completions: one prompt's G
    assert len(first_group) == GROUP_SIZE and abs(float(first_group.sum())) < 1e-9


def test_the_mean_loss_is_the_summed_loss_over_the_completion_tokens():
    x, y = make_problem(AuditSetup(2, 2, None, False, "rl")).batches[0]
    logits = torch.randn(*y.tokens.shape, ACTIONS, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    assert float(policy_gradient_loss(logits, y)) == pytest.approx(float(policy_gradient_loss(logits, y, "sum"))
                                                                   / completion_tokens(y))


def test_a_bad_reduction_names_the_parameter():
    x, y = make_problem(AuditSetup(2, 2, None, False, "rl")).batches[0]
    with pytest.raises(ValueError, match="reduction must be 'mean' or 'sum'"):
        policy_gradient_loss(torch.zeros(*y.tokens.shape, ACTIONS), y, "none")


def test_a_one_pass_rl_loop_passes_and_the_problem_is_listed():
    def streamed(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
        window = []

        def update(window):
            tokens = sum(completion_tokens(y) for _, y in window)
            for x, y in window:
                (loss_fn(model(x), y, reduction="sum") / tokens).backward()
            optimizer.step()
            optimizer.zero_grad()

        for batch in batches:
            window.append(batch)
            if len(window) == accumulation_steps:
                update(window)
                window = []
        if window:
            update(window)

    assert audit_training_loop(streamed, 3, problem="rl").matches_reference
    with pytest.raises(ValueError, match="problem must be one of"):
        audit_training_loop(dapo_window, 3, problem="grpo")
