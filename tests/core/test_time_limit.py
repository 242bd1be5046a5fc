"""The lab's one time limit stops the learner's code, also pure Python and a bare except:, in
the main thread and in others, and leaves the interpreter as it found it."""
import os
import sys
import threading
import time

import pytest

from widgets.core import time_limit
from widgets.core.time_limit import TimeLimit, call


def spins():
    while True:
        pass


def swallows_every_stop():
    while True:
        try:
            time.sleep(1)
            [i for i in range(100)]
        except:  # noqa: E722
            pass


def swallows_twice():
    while True:
        try:
            while True:
                try:
                    [i for i in range(10)]
                except:  # noqa: E722
                    pass
        except:  # noqa: E722
            pass


HANGS = [spins, swallows_every_stop, swallows_twice]


def stopped_after(function, seconds=0.3):
    start = time.monotonic()
    with pytest.raises(TimeLimit):
        call(seconds, function)
    return time.monotonic() - start


@pytest.mark.parametrize("hang", HANGS, ids=[h.__name__ for h in HANGS])
def test_the_main_thread_is_stopped_and_left_as_it_was(hang):
    trace = sys.gettrace()
    assert stopped_after(hang) < 0.3 + 2
    assert sys.gettrace() is trace
    assert call(0.3, lambda: 42) == 42


@pytest.mark.parametrize("hang", HANGS, ids=[h.__name__ for h in HANGS])
def test_other_threads_are_stopped_from_the_watchdog(hang):
    took = {}

    def rank(r):
        took[r] = stopped_after(hang)

    threads = [threading.Thread(target=rank, args=(r,), daemon=True) for r in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=10)
    assert sorted(took) == [0, 1] and max(took.values()) < 0.3 + 5, took


def sleeps():
    time.sleep(600)


def test_a_sleep_in_the_main_thread_is_stopped():
    assert stopped_after(sleeps) < 0.3 + 2


def test_a_thread_in_a_sleep_runs_on_until_it_wakes_then_is_stopped():
    outcome = []

    def naps():
        try:
            call(0.2, lambda: (time.sleep(1.5), spins()))
        except TimeLimit:
            outcome.append("stopped")

    thread = threading.Thread(target=naps, daemon=True)
    thread.start()
    thread.join(timeout=0.8)
    assert thread.is_alive()  # a C call: not interrupted
    thread.join(timeout=5)
    assert outcome == ["stopped"]


def test_what_the_function_returns_or_raises_passes_through():
    assert call(5, lambda a, b=0: a + b, 1, b=2) == 3
    with pytest.raises(ZeroDivisionError):
        call(5, lambda: 1 / 0)

    def interrupted():
        raise KeyboardInterrupt
    with pytest.raises(KeyboardInterrupt):
        call(5, interrupted)
    time_limit.check()  # outside any call: nothing to stop


def test_calls_nest_and_the_earlier_deadline_wins():
    def inner():
        return call(30, spins)
    assert stopped_after(inner, 0.3) < 0.3 + 2
    assert call(0.5, lambda: call(0.2, lambda: 7)) == 7


@pytest.mark.parametrize("in_a_thread", [False, True], ids=["main", "thread"])
def test_a_function_ending_at_its_deadline_leaves_no_stray_stop_behind(in_a_thread):
    def just_in_time():
        deadline = time.monotonic() + 0.1
        while time.monotonic() < deadline:
            pass

    def race():
        for _ in range(5):  # stopped or not, each time: a stray stop would land in the sleep, outside call
            try:
                call(0.1, just_in_time)
            except TimeLimit:
                pass
            time.sleep(0.15)
        return "clean"

    if not in_a_thread:
        assert race() == "clean"
        return
    outcome = []
    thread = threading.Thread(target=lambda: outcome.append(race()), daemon=True)
    thread.start()
    thread.join(timeout=10)
    assert outcome == ["clean"]


def test_a_previous_tracer_is_put_back():
    seen = []

    def tracer(frame, event, arg):
        seen.append(event)
        return None

    sys.settrace(tracer)
    try:
        with pytest.raises(TimeLimit):
            call(0.2, swallows_every_stop)
        assert sys.gettrace() is tracer
    finally:
        sys.settrace(None)


def test_the_learners_code_is_told_from_the_librarys():
    assert time_limit.learners_code(__file__)
    assert not time_limit.learners_code(time_limit.__file__)
    assert not time_limit.learners_code(os.__file__)
    assert not time_limit.learners_code("<frozen importlib._bootstrap>")


@pytest.mark.parametrize("hang", HANGS, ids=[h.__name__ for h in HANGS])
def test_without_sigalrm_the_main_thread_is_stopped_from_the_watchdog(hang, monkeypatch):
    monkeypatch.setattr(time_limit, "_WAKE", None)  # as on Windows
    assert stopped_after(hang) < 0.3 + 2
