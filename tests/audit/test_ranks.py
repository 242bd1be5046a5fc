"""The auditor across ranks: a token loop run once per rank (threads), its piles averaged as DDP does.

The ranks' real-token counts differ in every window, so a rank's own token mean is not its share
of the global one. The truth is plain autograd on every rank's window together, never the
auditor's own arithmetic; both of the usual fixes pass, the per-rank mean and the double division
are named, at K = 2 and 3.
"""
import threading

import pytest
import torch

from widgets.audit import audit_training_loop
from widgets.audit.problems import AuditSetup, token_cross_entropy
from widgets.audit.ranks import rank_problems, run_ranks
from widgets.core.accumulation import IGNORE_INDEX


def real(window):
    return sum(int((y != IGNORE_INDEX).sum()) for _, y in window)


# ----------------------------------------------------------------------------- right loops


def global_count(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None, *, comm):
    """All-reduce the window's token count first; each rank's token sum x world_size / the global count."""
    for start in range(0, len(batches), accumulation_steps):
        window = batches[start : start + accumulation_steps]
        tokens = comm.all_reduce(torch.tensor(real(window))).item()  # every rank's tokens, before any backward
        for x, y in window:
            loss = loss_fn(model(x), y, reduction="sum")
            (loss * comm.world_size / tokens).backward()  # x world_size: DDP's mean over ranks divides by it
        optimizer.step()
        if scheduler is not None:
            scheduler.step()
        optimizer.zero_grad()


def sums_then_scaled(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None, comm=None):
    """Back-propagate the token sums; scale .grad by world_size / the global count after the last backward."""
    n = len(batches)
    tokens = torch.zeros((), dtype=torch.float64)
    for i, (x, y) in enumerate(batches):
        loss_fn(model(x), y, reduction="sum").backward()
        tokens += int((y != IGNORE_INDEX).sum())
        if (i + 1) % accumulation_steps == 0 or i + 1 == n:
            comm.all_reduce(tokens)
            for p in model.parameters():
                p.grad *= comm.world_size / tokens
            optimizer.step()
            optimizer.zero_grad()
            tokens = torch.zeros((), dtype=torch.float64)


# ----------------------------------------------------------------------------- wrong loops


def per_rank_mean(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None, *, comm):
    for start in range(0, len(batches), accumulation_steps):
        window = batches[start : start + accumulation_steps]
        tokens = real(window)  # BUG: this rank's tokens only; DDP then averages the ranks' means
        for x, y in window:
            (loss_fn(model(x), y, reduction="sum") / tokens).backward()
        optimizer.step()
        optimizer.zero_grad()


def global_count_divided_twice(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None, *, comm):
    for start in range(0, len(batches), accumulation_steps):
        window = batches[start : start + accumulation_steps]
        tokens = comm.all_reduce(torch.tensor(real(window))).item()
        for x, y in window:
            (loss_fn(model(x), y, reduction="sum") / tokens).backward()  # BUG: DDP's mean divides by W again
        optimizer.step()
        optimizer.zero_grad()


def per_micro_batch_mean(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None, *, comm):
    n = len(batches)
    for i, (x, y) in enumerate(batches):
        (loss_fn(model(x), y) / accumulation_steps).backward()  # BUG: token mean per micro-batch
        if (i + 1) % accumulation_steps == 0 or i + 1 == n:
            optimizer.step()
            optimizer.zero_grad()


def forgets_final_step(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None, *, comm):
    for start in range(0, len(batches), accumulation_steps):
        window = batches[start : start + accumulation_steps]
        tokens = comm.all_reduce(torch.tensor(real(window))).item()
        for x, y in window:
            (loss_fn(model(x), y, reduction="sum") * comm.world_size / tokens).backward()
        if len(window) == accumulation_steps:  # BUG: the uneven final window never steps
            optimizer.step()
            optimizer.zero_grad()


RIGHT = [global_count, sums_then_scaled]
WRONG = [
    (per_rank_mean, {"per_rank_normaliser"}),
    (global_count_divided_twice, {"ranks_divided_twice"}),
    (per_micro_batch_mean, {"normalised_per_micro_batch"}),
    (forgets_final_step, {"forget_final_step"}),
]


@pytest.mark.parametrize("loop", RIGHT, ids=[loop.__name__ for loop in RIGHT])
@pytest.mark.parametrize("K", [2, 3])
@pytest.mark.parametrize("world_size", [2, 3])
def test_both_fixes_pass(loop, K, world_size):
    report = audit_training_loop(loop, K, problem="tokens", world_size=world_size)
    assert report.matches_reference, str(report)
    assert report.update_ratios == pytest.approx([1.0] * len(report.update_ratios)) and report.update_ratios


@pytest.mark.parametrize("loop, names", WRONG, ids=[loop.__name__ for loop, _ in WRONG])
@pytest.mark.parametrize("K", [2, 3])
def test_each_wrong_loop_is_named_alone(loop, names, K):
    report = audit_training_loop(loop, K, problem="tokens", world_size=2)
    assert report.mistakes == names, str(report)
    assert len(report.findings) == len(names)


@pytest.mark.parametrize("world_size", [2, 3, 4])
def test_the_double_division_is_world_size_times_too_small(world_size):
    report = audit_training_loop(global_count_divided_twice, 3, problem="tokens", world_size=world_size)
    assert report.update_ratios == pytest.approx([1 / world_size] * 3)
    assert "Fix: multiply each rank's token sum by world_size / the global count" in report.findings[0]


def test_the_per_rank_finding_says_how_much_a_token_weighs():
    report = audit_training_loop(per_rank_mean, 3, problem="tokens", world_size=2)
    text = str(report)
    assert "on each of 2 ranks: 7 micro-batches of 3 sequences (the last of 1) per rank" in text
    assert "this rank's window holds" in report.findings[0] and "all 2 ranks'" in report.findings[0]
    assert report.counts["backward passes"] == (14, 14) and report.counts["optimizer.step()"] == (6, 6)


@pytest.mark.parametrize("K, world_size", [(2, 2), (3, 3)])
def test_the_averaged_step_is_the_window_mean_of_every_rank_by_plain_autograd(K, world_size):
    problems, _ = rank_problems(AuditSetup(K, 2 * K + 1, problem="tokens", world_size=world_size))
    runs, _, _ = run_ranks(global_count, problems, 30.0)
    assert all(run.error is None for run in runs)
    for u, g in enumerate(problems[0].windows):
        weight = runs[0].tape.steps[u].weight
        assert all(torch.equal(run.tape.steps[u].weight, weight) for run in runs)  # the replicas agree
        w = weight.clone().requires_grad_(True)
        x = torch.cat([p.batches[j][0] for p in problems for j in g])
        y = torch.cat([p.batches[j][1] for p in problems for j in g])
        (truth,) = torch.autograd.grad(token_cross_entropy(torch.nn.functional.embedding(x, w), y), w)
        averaged = sum(run.tape.steps[u].grad for run in runs) / world_size  # what DDP's all-reduce leaves
        assert torch.allclose(averaged, truth.reshape(-1), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("world_size", [2, 3, 4])
def test_the_ranks_token_counts_differ_in_every_window(world_size):
    problems, whole = rank_problems(AuditSetup(3, 7, problem="tokens", world_size=world_size))
    for u, g in enumerate(problems[0].windows):
        counts = [sum(p.items(j) for j in g) for p in problems]
        assert len(set(counts)) == world_size and sum(counts) == problems[0].global_items[u]
        assert sum(whole.items(j) for j in whole.windows[u]) == sum(counts)


def test_scheduler_and_a_one_pass_loop_across_ranks():
    assert audit_training_loop(global_count, 3, problem="tokens", world_size=2, with_scheduler=True).matches_reference

    def streamed(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None, *, comm):
        window = []

        def update(window):
            tokens = comm.all_reduce(torch.tensor(real(window))).item()
            for x, y in window:
                (loss_fn(model(x), y, reduction="sum") * comm.world_size / tokens).backward()
            optimizer.step()
            optimizer.zero_grad()

        for batch in batches:
            window.append(batch)
            if len(window) == accumulation_steps:
                update(window)
                window = []
        if window:
            update(window)

    assert audit_training_loop(streamed, 2, problem="tokens", world_size=3).matches_reference


# ----------------------------------------------------------------------------- never a crash, never a thread left


def audit_threads():
    return [t for t in threading.enumerate() if t.name.startswith("audit-rank-")]


def raises_on_rank_1(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None, *, comm):
    if comm.rank == 1:
        raise ValueError("rank 1 has no data")
    global_count(model, optimizer, loss_fn, batches, accumulation_steps, comm=comm)


def all_reduces_an_int(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None, *, comm):
    comm.all_reduce(real(batches))


def out_of_step(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None, *, comm):
    if comm.rank == 0:
        comm.all_reduce(torch.tensor(1))
    per_rank_mean(model, optimizer, loss_fn, batches, accumulation_steps, comm=comm)


def rank_1_never_ends(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None, *, comm):
    x, y = batches[0]
    while comm.rank == 1:
        loss_fn(model(x), y)
    global_count(model, optimizer, loss_fn, batches, accumulation_steps, comm=comm)


@pytest.mark.parametrize("loop, options, name, words", [
    (raises_on_rank_1, {}, "loop_raised", "rank 1 has no data"),
    (all_reduces_an_int, {}, "loop_raised", "comm.all_reduce takes a tensor"),
    (out_of_step, {}, "loop_raised", "the ranks met at different calls"),
    (rank_1_never_ends, dict(time_limit_s=0.5), "time_limit", "time limit"),
], ids=["raises_on_rank_1", "all_reduces_an_int", "out_of_step", "rank_1_never_ends"])
def test_a_rank_that_fails_is_reported_and_no_rank_is_left_waiting(loop, options, name, words):
    report = audit_training_loop(loop, 2, problem="tokens", world_size=2, **options)
    assert name in report.mistakes and words in " ".join(report.findings), str(report)
    assert not audit_threads()


def test_bad_arguments_name_the_parameter():
    def no_steps(model, optimizer, loss_fn, batches, comm=None):
        pass

    with pytest.raises(TypeError, match="must accept .*comm=.*no_steps"):
        audit_training_loop(no_steps, 2, problem="tokens", world_size=2)
    for value in (0, 5):
        with pytest.raises(ValueError, match=r"world_size must be one of \[1, 2, 3, 4\], got"):
            audit_training_loop(global_count, 2, problem="tokens", world_size=value)
    for value in (2.0, True, "2"):
        with pytest.raises(TypeError, match=r"world_size must be an int, one of \[1, 2, 3, 4\], got"):
            audit_training_loop(global_count, 2, problem="tokens", world_size=value)
    with pytest.raises(ValueError, match="problem must be 'tokens' for a loop taking comm"):
        audit_training_loop(global_count, 2, world_size=2)
    with pytest.raises(ValueError, match="clip_norm must be None for a loop taking comm"):
        audit_training_loop(global_count, 2, problem="tokens", world_size=2, clip_norm=1.0)


def test_world_size_1_is_the_old_audit():
    def one(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
        for start in range(0, len(batches), accumulation_steps):
            window = batches[start : start + accumulation_steps]
            for x, y in window:
                (loss_fn(model(x), y, reduction="sum") / real(window)).backward()
            optimizer.step()
            optimizer.zero_grad()

    assert str(audit_training_loop(one, 3, problem="tokens", world_size=1)) == \
        str(audit_training_loop(one, 3, problem="tokens"))
    assert audit_training_loop(one, 3, problem="tokens").world_size == 1
