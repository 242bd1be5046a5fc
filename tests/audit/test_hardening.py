"""The auditor under hostile loops and a changed torch state: it never raises, never hangs, and
leaves the learner's torch state as it found it. Each loop is written as a learner would."""
import itertools

import pytest
import torch

from widgets.audit import audit_training_loop
from widgets.audit import outcome


def ends_update(i, K, n):
    return (i + 1) % K == 0 or i + 1 == n


def right_loop(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    n, logged, losses = len(batches), [], []
    for i, (x, y) in enumerate(batches):
        start = i // accumulation_steps * accumulation_steps
        share = len(y) / sum(len(t) for _, t in batches[start : start + accumulation_steps])  # n_i / n
        loss = loss_fn(model(x), y)
        (loss * share).backward()
        losses.append(loss.item() * share)
        if ends_update(i, accumulation_steps, n):
            optimizer.step()
            optimizer.zero_grad()
            logged.append(sum(losses))
            losses = []
    return logged


def torch_state():
    return (torch.is_grad_enabled(), torch.get_default_dtype(), torch.are_deterministic_algorithms_enabled(),
            torch.is_anomaly_enabled(), torch.get_num_threads())


FLAGS = {  # flag -> (turn it to the unusual side, turn it back)
    "grad_mode": (lambda: torch.set_grad_enabled(False), lambda: torch.set_grad_enabled(True)),
    "default_dtype": (lambda: torch.set_default_dtype(torch.float64), lambda: torch.set_default_dtype(torch.float32)),
    "deterministic": (lambda: torch.use_deterministic_algorithms(True),
                      lambda: torch.use_deterministic_algorithms(False)),
    "anomaly": (lambda: torch.autograd.set_detect_anomaly(True), lambda: torch.autograd.set_detect_anomaly(False)),
    "threads": (lambda: torch.set_num_threads(3), None),
}


@pytest.fixture
def restore_torch_state():
    threads = torch.get_num_threads()
    yield
    for _, back in FLAGS.values():
        if back is not None:
            back()
    torch.set_num_threads(threads)


@pytest.mark.parametrize("flag", sorted(FLAGS))
def test_a_flag_flipped_before_the_audit_changes_no_verdict_and_stays_flipped(flag, restore_torch_state):
    FLAGS[flag][0]()
    before = torch_state()
    report = audit_training_loop(right_loop, 4)
    assert report.matches_reference, str(report)
    assert torch_state() == before


@pytest.mark.parametrize("flag", sorted(FLAGS))
@pytest.mark.parametrize("where", ["start", "end"])
def test_a_flag_flipped_inside_the_loop_neither_crashes_nor_leaks(flag, where, restore_torch_state):
    def flips(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
        if where == "start":
            FLAGS[flag][0]()
        logged = right_loop(model, optimizer, loss_fn, batches, accumulation_steps)
        if where == "end":
            FLAGS[flag][0]()
        return logged

    before = torch_state()
    report = audit_training_loop(flips, 4)
    if not (flag == "grad_mode" and where == "start"):
        assert report.matches_reference, str(report)
    else:  # backward() with gradients off: reported, with torch's message explained
        assert report.mistakes == {"loop_raised"} and "no graph" in report.findings[0]
    assert torch_state() == before
    assert audit_training_loop(right_loop, 3).matches_reference  # the next audit is unaffected


def test_a_loop_that_never_returns_is_stopped_and_the_next_audit_runs():
    def forever(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
        right_loop(model, optimizer, loss_fn, batches, accumulation_steps)
        x, y = batches[0]
        while True:
            try:
                loss_fn(model(x), y)
            except Exception:  # a learner's catch-all does not swallow the stop
                pass

    report = audit_training_loop(forever, 4, time_limit_s=0.5)
    assert report.mistakes == {"time_limit"}
    assert "ran past the time limit of 0.5 s" in report.findings[0] and "of forever" in report.findings[0]
    assert audit_training_loop(right_loop, 4).matches_reference


def test_an_endless_returned_iterator_is_read_only_so_far():
    def counts(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
        right_loop(model, optimizer, loss_fn, batches, accumulation_steps)
        return itertools.count()

    report = audit_training_loop(counts, 4)
    assert report.mistakes == {"log_wrong"} and "5000 values or more for 3 updates" in report.findings[0]


def test_a_returned_object_whose_iter_raises_is_a_bad_return_value():
    class Hostile:
        def __iter__(self):
            raise RuntimeError("no")

    def returns_it(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
        right_loop(model, optimizer, loss_fn, batches, accumulation_steps)
        return Hostile()

    assert audit_training_loop(returns_it, 4).mistakes == {"bad_return_value"}


def test_an_exception_whose_str_raises_is_reported():
    class Odd(Exception):
        def __str__(self):
            raise ValueError("cannot print me")

    def raises_it(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
        raise Odd()

    report = audit_training_loop(raises_it, 4)
    assert report.mistakes == {"loop_raised"} and "Odd" in report.findings[0]
    assert str(report)


def test_a_string_is_not_read_as_a_log_of_its_digits():
    def returns_digits(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
        right_loop(model, optimizer, loss_fn, batches, accumulation_steps)
        return "123"

    report = audit_training_loop(returns_digits, 3, num_batches=9)  # 3 updates: '123' has 3 digits
    assert report.mistakes == {"bad_return_value"}
    assert "a log must be a list of numbers" in report.findings[0]


def test_torchs_own_message_is_explained():
    def backward_twice_through_a_total(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
        total = 0
        for x, y in batches:
            total = total + loss_fn(model(x), y) / accumulation_steps
            total.backward()  # the second time goes through the first micro-batch's freed graph

    report = audit_training_loop(backward_twice_through_a_total, 4)
    assert report.mistakes == {"loop_raised"}
    assert "Trying to backward through the graph a second time" in report.findings[0]
    assert "that means a backward() ran through a graph an earlier backward() had already freed" \
        in report.findings[0]


def test_a_check_that_fails_on_an_odd_record_does_not_raise(monkeypatch):
    def broken(*args, **kwargs):
        raise ZeroDivisionError("a record no check foresaw")

    monkeypatch.setattr(outcome, "check_outcome", broken)
    report = audit_training_loop(right_loop, 4)
    assert report.mistakes == frozenset() and any("a fault of the auditor's" in note for note in report.notes)


def test_time_limit_s_is_checked():
    with pytest.raises(ValueError, match="time_limit_s"):
        audit_training_loop(right_loop, 4, time_limit_s=0)
    with pytest.raises(TypeError, match="time_limit_s"):
        audit_training_loop(right_loop, 4, time_limit_s="30")
