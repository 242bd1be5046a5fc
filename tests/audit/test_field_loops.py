"""Loops from the field that the auditor once got wrong, each with the verdict it must give.

92 learner loops written independently of the project, and a probe of hostile ones, found right
loops accused (a closure step, a deepcopy replica), kernels hung (pure Python, sleeps, a bare
`except:`, ranks), a raise and a double print, a verdict talked into (torch patched), and field
mistakes named generically. Each snippet below is the loop as written, run at K = 3 and 4, with and
without an uneven tail (and at world_size 2 where the mistake is one of ranks); the test asserts the
exact set of names.
"""
import copy
import math
import threading
import time

import pytest
import torch

from widgets.audit import audit_training_loop
from widgets.core.accumulation import IGNORE_INDEX

SHAPES = [(K, tail) for K in (3, 4) for tail in (True, False)]
IDS = [f"K{K}-{'uneven_tail' if tail else 'no_tail'}" for K, tail in SHAPES]


def batches_for(K, tail):
    return 2 * K + (K // 2 if tail else 0)


def share_of(batches, i, K):
    start = i // K * K
    return len(batches[i][1]) / sum(len(y) for _, y in batches[start : start + K])


def right_loop(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    n = len(batches)
    for i, (x, y) in enumerate(batches):
        (loss_fn(model(x), y) * share_of(batches, i, accumulation_steps)).backward()
        if (i + 1) % accumulation_steps == 0 or i + 1 == n:
            optimizer.step()
            optimizer.zero_grad()


def real(window):
    return sum(int((y != IGNORE_INDEX).sum()) for _, y in window)


# ----------------------------------------------------------------------------- right loops once accused


def loop(model, opt, loss_fn, batches, K, scheduler=None):  # the closure snippet, as written
    for s in range(0, len(batches), K):
        w = batches[s:s+K]; n = sum(len(x) for x, _ in w)  # noqa: E702
        def closure():
            opt.zero_grad()
            for x, y in w: (loss_fn(model(x), y) * len(x) / n).backward()  # noqa: E701, B023 (runs in its window)
        opt.step(closure)


def closure_across_ranks(model, opt, loss_fn, batches, K, scheduler=None, *, comm):
    for s in range(0, len(batches), K):
        w = batches[s:s+K]
        n = comm.all_reduce(torch.tensor(real(w))).item()  # every rank's tokens, before any backward

        def closure():
            opt.zero_grad()
            for x, y in w:  # noqa: B023 - the closure runs within its own window's iteration
                (loss_fn(model(x), y, reduction="sum") * comm.world_size / n).backward()  # noqa: B023
        opt.step(closure)


def shadow_replica(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    """Gradients computed on a replica made with copy.deepcopy, copied into the model's .grad."""
    shadow = copy.deepcopy(model)
    for s in range(0, len(batches), accumulation_steps):
        window = batches[s : s + accumulation_steps]
        n = sum(len(x) for x, _ in window)
        shadow.load_state_dict(model.state_dict())
        for x, y in window:
            (loss_fn(shadow(x), y) * len(x) / n).backward()
        for p, q in zip(model.parameters(), shadow.parameters()):
            p.grad = q.grad.clone()
        shadow.zero_grad()  # ready for the next window: it must empty the replica's .grad, not the model's
        optimizer.step()
        optimizer.zero_grad()


@pytest.mark.parametrize("K, tail", SHAPES, ids=IDS)
@pytest.mark.parametrize("right", [loop, shadow_replica], ids=["closure", "shadow_replica"])
def test_a_closure_step_and_a_deepcopy_replica_are_right(right, K, tail):
    report = audit_training_loop(right, K, num_batches=batches_for(K, tail))
    assert report.mistakes == frozenset(), str(report)
    assert report.counts["optimizer.step()"] == (-(-batches_for(K, tail) // K),) * 2


@pytest.mark.parametrize("K, tail", SHAPES, ids=IDS)
def test_a_closure_step_is_right_across_ranks(K, tail):
    report = audit_training_loop(closure_across_ranks, K, num_batches=batches_for(K, tail), problem="tokens",
                                 world_size=2)
    assert report.mistakes == frozenset(), str(report)


def test_the_replica_says_where_the_gradients_came_from_and_its_zero_grad_counts_on_itself():
    report = audit_training_loop(shadow_replica, 4)
    assert report.counts["backward passes"] == (0, 10) and report.counts["zero_grad()"] == (3, 3)
    assert any("computed the gradients elsewhere" in note for note in report.notes)
    replica = copy.deepcopy(torch.nn.Linear(3, 1))
    assert type(replica).__name__ == "Linear"


# ----------------------------------------------------------------------------- loops that hung the kernel


def spins(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    right_loop(model, optimizer, loss_fn, batches, accumulation_steps)
    while True:
        pass


def sleeps(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    right_loop(model, optimizer, loss_fn, batches, accumulation_steps)
    time.sleep(600)


def retries_the_step(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    """A bare except: around the step, retried until it succeeds: it swallows the auditor's stop."""
    n = len(batches)
    for i, (x, y) in enumerate(batches):
        (loss_fn(model(x), y) * share_of(batches, i, accumulation_steps)).backward()
        if (i + 1) % accumulation_steps == 0 or i + 1 == n:
            while True:
                try:
                    optimizer.step()
                    time.sleep(600 if i + 1 == n else 0)  # the last step hangs: the retry swallows the stop
                    break
                except:  # noqa: E722
                    pass
            optimizer.zero_grad()


def epochs_with_a_bare_except(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    while True:  # epochs, never ending
        for i, (x, y) in enumerate(batches):
            try:
                (loss_fn(model(x), y) * share_of(batches, i, accumulation_steps)).backward()
                if (i + 1) % accumulation_steps == 0 or i + 1 == len(batches):
                    optimizer.step()
                    optimizer.zero_grad()
            except:  # noqa: E722
                pass


def spins_on_rank_1(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None, *, comm):
    while comm.rank == 1:  # pure Python, no torch call: rank 0 then waits at its first step
        pass
    for s in range(0, len(batches), accumulation_steps):
        window = batches[s : s + accumulation_steps]
        for x, y in window:
            loss_fn(model(x), y, reduction="sum").backward()
        optimizer.step()
        optimizer.zero_grad()


def both_ranks_spin(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None, *, comm):
    total = 0
    while True:
        try:
            total += 1
        except:  # noqa: E722
            pass


HANGING = [(spins, {}), (sleeps, {}), (retries_the_step, {}), (epochs_with_a_bare_except, {}),
           (spins_on_rank_1, dict(problem="tokens", world_size=2)),
           (both_ranks_spin, dict(problem="tokens", world_size=2))]
HANGING_IDS = [hang.__name__ for hang, _ in HANGING]


@pytest.mark.parametrize("K, tail", SHAPES, ids=IDS)
@pytest.mark.parametrize("hang, options", HANGING, ids=HANGING_IDS)
def test_a_hanging_loop_is_stopped_at_the_time_limit(hang, options, K, tail):
    report = audit_training_loop(hang, K, num_batches=batches_for(K, tail), time_limit_s=0.5, **options)
    assert report.mistakes == {"time_limit"}, str(report)


@pytest.mark.parametrize("hang, options", HANGING, ids=HANGING_IDS)
def test_each_hanging_loop_returns_within_the_limit_and_the_next_audit_is_right(hang, options):
    audit_training_loop(right_loop, 3)  # torch's first optimizer imports torch._dynamo (seconds): not the loop's time
    start = time.monotonic()
    report = audit_training_loop(hang, 4, time_limit_s=2, **options)
    took = time.monotonic() - start
    assert report.mistakes == {"time_limit"}, str(report)
    assert "past the time limit" in report.findings[0]
    assert took < 2 + 5, f"{hang.__name__} returned after {took:.1f} s"
    print(f"{hang.__name__}: returned after {took:.2f} s (time_limit_s = 2)")
    assert audit_training_loop(right_loop, 3).matches_reference
    assert audit_training_loop(closure_across_ranks, 2, problem="tokens", world_size=2).matches_reference
    assert not [t for t in threading.enumerate() if t.name.startswith("audit-rank")]


def test_a_rank_asleep_past_the_limit_is_contained_then_stopped_and_the_report_says_so():
    def sleeps_on_rank_1(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None, *, comm):
        if comm.rank == 1:
            time.sleep(4)  # a C call: its thread cannot be stopped before it returns
            while True:
                pass
        for x, y in batches:
            loss_fn(model(x), y, reduction="sum").backward()
            optimizer.step()

    start = time.monotonic()
    report = audit_training_loop(sleeps_on_rank_1, 2, problem="tokens", world_size=2, time_limit_s=1)
    assert time.monotonic() - start < 1 + 5
    assert report.mistakes == {"time_limit"}, str(report)
    assert any("rank 1's thread runs on in the background on its own copy of the model" in n for n in report.notes)
    deadline = time.monotonic() + 10
    while [t for t in threading.enumerate() if t.name == "audit-rank-1"] and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [t for t in threading.enumerate() if t.name == "audit-rank-1"]  # stopped once it woke up
    assert audit_training_loop(right_loop, 4).matches_reference


# ----------------------------------------------------------------------------- it raised, or printed twice


class Stop(BaseException):
    """Not an Exception: a learner's own BaseException subclass."""


@pytest.mark.parametrize("error", [Stop("enough"), GeneratorExit(), SystemExit(3)], ids=["own", "generator", "exit"])
def test_every_exception_from_the_loop_is_a_finding(error):
    def raises(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
        right_loop(model, optimizer, loss_fn, batches, accumulation_steps)
        raise error

    report = audit_training_loop(raises, 4)
    assert report.mistakes == {"loop_raised"}, str(report)
    assert type(error).__name__ in report.findings[0]


def test_a_keyboard_interrupt_still_interrupts():
    def interrupted(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        audit_training_loop(interrupted, 4)
    assert audit_training_loop(right_loop, 4).matches_reference


# ----------------------------------------------------------------------------- talked into a verdict


def undivided(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    n = len(batches)
    for i, (x, y) in enumerate(batches):
        loss_fn(model(x), y).backward()  # BUG: the loss undivided
        if (i + 1) % accumulation_steps == 0 or i + 1 == n:
            optimizer.step()
            optimizer.zero_grad()


def says_everything_matches(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    torch.allclose = lambda *args, **kwargs: True
    torch.equal = lambda *args, **kwargs: True
    math.isclose = lambda *args, **kwargs: True
    undivided(model, optimizer, loss_fn, batches, accumulation_steps)


def backward_does_nothing(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    torch.Tensor.backward = lambda self, *args, **kwargs: None
    right_loop(model, optimizer, loss_fn, batches, accumulation_steps)


@pytest.mark.parametrize("K, tail", SHAPES, ids=IDS)
def test_a_loop_that_patches_the_comparisons_is_still_judged_and_told(K, tail):
    allclose, equal, isclose = torch.allclose, torch.equal, math.isclose
    report = audit_training_loop(says_everything_matches, K, num_batches=batches_for(K, tail))
    assert report.mistakes == {"loss_not_divided", "replaced_functions"}, str(report)
    assert "torch.allclose" in str(report) and "math.isclose" in str(report)
    assert (torch.allclose, torch.equal, math.isclose) == (allclose, equal, isclose)


@pytest.mark.parametrize("K, tail", SHAPES, ids=IDS)
def test_a_loop_that_patches_backward_spoils_no_later_audit(K, tail):
    backward = torch.Tensor.backward
    report = audit_training_loop(backward_does_nothing, K, num_batches=batches_for(K, tail))
    assert report.mistakes == {"never_calls_backward", "replaced_functions"}, str(report)
    assert torch.Tensor.backward is backward
    assert audit_training_loop(right_loop, K, num_batches=batches_for(K, tail)).matches_reference


def test_a_method_added_over_an_inherited_one_is_taken_away():
    def shadows_add(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
        torch.Tensor.add_ = lambda self, *args, **kwargs: self
        right_loop(model, optimizer, loss_fn, batches, accumulation_steps)

    report = audit_training_loop(shadows_add, 4)
    assert "replaced_functions" in report.mistakes and "torch.Tensor.add_" in str(report)
    assert "add_" not in vars(torch.Tensor)
    assert audit_training_loop(right_loop, 4).matches_reference


# ----------------------------------------------------------------------------- field mistakes, named


def grpo_sequence_mean(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    """TRL's loss_type='grpo': each completion's token losses averaged over its own length, then the mean."""
    n = len(batches)
    for i, (x, y) in enumerate(batches):
        logp = model(x).log_softmax(-1).gather(-1, y.tokens.clamp(min=0).unsqueeze(-1)).squeeze(-1)
        per_token = -y.advantages.unsqueeze(1) * logp * y.mask
        loss = (per_token.sum(1) / y.mask.sum(1)).mean()  # BUG: a per-sequence mean
        (loss / accumulation_steps).backward()
        if (i + 1) % accumulation_steps == 0 or i + 1 == n:
            optimizer.step()
            optimizer.zero_grad()


def count_all_reduced_per_micro_batch(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None, *,
                                      comm):
    n = len(batches)
    for i, (x, y) in enumerate(batches):
        tokens = comm.all_reduce(torch.tensor(int((y != IGNORE_INDEX).sum()))).item()  # BUG: this micro-batch's
        loss = loss_fn(model(x), y, reduction="sum") * comm.world_size / tokens
        (loss / accumulation_steps).backward()
        if (i + 1) % accumulation_steps == 0 or i + 1 == n:
            optimizer.step()
            optimizer.zero_grad()


def lr_scaled_instead_of_loss(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    for group in optimizer.param_groups:
        group["lr"] /= accumulation_steps  # BUG: the rate divided, the loss not
    n = len(batches)
    for i, (x, y) in enumerate(batches):
        loss_fn(model(x), y).backward()
        if (i + 1) % accumulation_steps == 0 or i + 1 == n:
            optimizer.step()
            optimizer.zero_grad()


def lr_and_loss_scaled(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    for group in optimizer.param_groups:
        group["lr"] /= accumulation_steps  # BUG: the rate divided as well as the loss
    right_loop(model, optimizer, loss_fn, batches, accumulation_steps)


def steps_by_hand(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    n = len(batches)
    for i, (x, y) in enumerate(batches):
        (loss_fn(model(x), y) * share_of(batches, i, accumulation_steps)).backward()
        if (i + 1) % accumulation_steps == 0 or i + 1 == n:
            for p in model.parameters():
                p.data -= 0.05 * p.grad  # BUG: by hand, not optimizer.step()
                p.grad = None


def steps_by_hand_under_no_grad(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    n = len(batches)
    for i, (x, y) in enumerate(batches):
        (loss_fn(model(x), y) * share_of(batches, i, accumulation_steps)).backward()
        if (i + 1) % accumulation_steps == 0 or i + 1 == n:
            with torch.no_grad():
                for p in model.parameters():
                    p -= 0.05 * p.grad  # BUG: by hand
            model.zero_grad()


FIELD = [
    (grpo_sequence_mean, dict(problem="rl"), {"grpo_sequence_mean"}),
    (count_all_reduced_per_micro_batch, dict(problem="tokens", world_size=2), {"count_all_reduced_per_micro_batch"}),
    (lr_scaled_instead_of_loss, {}, {"lr_scaled_instead_of_loss"}),
    (lr_and_loss_scaled, {}, {"learning_rate_changed"}),
    (steps_by_hand, {}, {"steps_by_hand"}),
    (steps_by_hand_under_no_grad, {}, {"steps_by_hand"}),
]


@pytest.mark.parametrize("K, tail", SHAPES, ids=IDS)
@pytest.mark.parametrize("mistake, options, names", FIELD, ids=[m.__name__ for m, _, _ in FIELD])
def test_each_field_mistake_has_its_own_name(mistake, options, names, K, tail):
    report = audit_training_loop(mistake, K, num_batches=batches_for(K, tail), **options)
    assert report.mistakes == names, str(report)
    assert len(report.findings) == len(names)


def test_grpo_says_how_much_a_token_of_a_short_completion_weighs_and_how_to_fix_it():
    report = audit_training_loop(grpo_sequence_mean, 4, problem="rl")
    text = report.findings[0]
    assert "GRPO's per-sequence mean" in text and "averaged each completion over its own tokens" in text
    assert "Fix: sum -A log p over all the completion tokens of the window" in text


def test_the_per_micro_batch_all_reduce_is_fixed_in_its_own_terms():
    report = audit_training_loop(count_all_reduced_per_micro_batch, 2, problem="tokens", world_size=2)
    text = report.findings[0]
    assert "all-reduce one count per window, not per micro-batch" in text
    assert "1/K for K equal" not in text


def test_a_wrong_scale_across_ranks_is_fixed_with_the_all_reduce():
    def tenth_of_the_global_count(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None, *, comm):
        for s in range(0, len(batches), accumulation_steps):
            window = batches[s : s + accumulation_steps]
            tokens = comm.all_reduce(torch.tensor(real(window))).item()
            for x, y in window:
                (loss_fn(model(x), y, reduction="sum") * comm.world_size / tokens * 0.9).backward()  # BUG: 0.9 x
            optimizer.step()
            optimizer.zero_grad()

    report = audit_training_loop(tenth_of_the_global_count, 2, problem="tokens", world_size=2)
    assert report.mistakes == {"wrong_loss_scale"}, str(report)
    assert "Fix: all-reduce the window's real-token count once" in report.findings[0]
    assert "1/K for K equal" not in report.findings[0]


def test_the_scaled_learning_rate_is_said_with_the_rates_it_ran_at():
    report = audit_training_loop(lr_scaled_instead_of_loss, 4)
    assert "steps ran at learning rates [0.0125, 0.0125, 0.0125], the reference's at [0.05, 0.05, 0.05]" \
        in report.findings[0]
    assert "Fix: leave the learning rate as it is" in report.findings[0]


@pytest.mark.parametrize("by_hand", [steps_by_hand, steps_by_hand_under_no_grad])
def test_stepping_by_hand_is_said_once_with_no_contradiction(by_hand):
    text = str(audit_training_loop(by_hand, 4))
    assert "never changed" not in text and "the weights changed, with 10 backward passes" in text
