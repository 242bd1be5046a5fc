"""One time limit for the learner's code the lab runs: past it an audited loop is stopped with
`TimeLimit`, and the kernel stays usable. (The exercises' `PassWatch` stops an answer at its torch
calls after the same TIME_LIMIT_S.)

    result = call(30.0, loop, model, optimizer, ...)   # raises TimeLimit once 30 s have passed
    check()   # at a watched event (a torch call): raise TimeLimit if the caller's limit has passed

How code that makes no torch call is stopped:
- in the main thread, where ipykernel runs a cell, an alarm signal (SIGALRM) raises `TimeLimit` at
  the deadline and every TICK_S after, also out of a `time.sleep`;
- in any other thread (the auditor's ranks), a watchdog thread raises it in that thread
  asynchronously (`PyThreadState_SetAsyncExc`) at the deadline and every TICK_S after;
- wherever a stop lands, a line tracer is armed on the thread's stack, so a bare `except:` that
  swallows it meets it again at the next line of the learner's own code (not torch's, not the
  standard library's, not this package's). CPython drops a tracer that raises, so a second bare
  `except:` around the first swallows the stop until the next tick arms it again.
What cannot be stopped: C code that holds the interpreter lock (one long torch kernel, a C loop such
as `sum(itertools.count())`) runs until it returns. In a thread other than the main one a blocking
C call (`time.sleep`) is not interrupted either: whoever runs such a thread joins it with a timeout,
and the watchdog stops it at its next line once the call returns. A process the code forks ends
when it comes back to `call` (`os._exit` in the child), so it never reaches the caller's verdict;
its own alarm is re-armed in case it never comes back. Pure Python, standard library only.
"""
from __future__ import annotations

import ctypes
import math
import os
import signal
import sys
import threading
import time
from typing import Callable, TypeVar

TIME_LIMIT_S = 30.0  # what a learner's loop or answer may take before it is stopped
TICK_S = 0.05  # past the deadline, the stop is raised again this often (a bare except: may swallow one)

T = TypeVar("T")


class TimeLimit(BaseException):
    """Raised in the learner's code once its time limit has passed. A BaseException, so that an
    `except Exception` does not swallow it; `call`'s caller turns it into a verdict."""

    def __init__(self, *args):
        super().__init__(*args)
        # The watchdog's stop is created in the thread it is raised in, right where it lands: arm the
        # line tracer there, as the alarm does in the main thread, so a bare except: cannot keep it out.
        state = getattr(_local, "state", None)
        if state is not None and state.limits and state.must_stop():
            _arm(state, sys._getframe(1))


_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep  # .../widgets/
_LIBRARIES = tuple({os.path.abspath(p) + os.sep for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)})


def learners_code(filename: str) -> bool:
    """Is code compiled from `filename` the learner's (a notebook cell, a script, a test), neither
    this package nor a library (torch, the standard library)?"""
    if filename.startswith("<frozen"):
        return False
    path = os.path.abspath(filename)
    return not path.startswith(_PACKAGE) and not path.startswith(_LIBRARIES)


class _Limit:
    """One `call` in progress on a thread: its deadline, and whether the learner's code is running."""

    __slots__ = ("deadline", "inside", "frame")

    def __init__(self, deadline: float):
        self.deadline, self.inside, self.frame = deadline, False, None


class _Thread:
    """A thread's `call`s in progress (nested: an exercise that audits a loop), innermost last."""

    def __init__(self):
        self.limits: list[_Limit] = []
        self.ident = threading.get_ident()
        self.main = threading.current_thread() is threading.main_thread()
        self.pid = os.getpid()
        self.armed: dict[int, tuple] = {}  # id(frame) -> (frame, its f_trace before the tracer was armed)
        self.previous_trace = None
        self.previous_alarm: tuple | None = None  # (handler, timer) of SIGALRM before the first call

    def must_stop(self) -> bool:
        """The innermost call is running the learner's code, and a deadline has passed."""
        return bool(self.limits) and self.limits[-1].inside and \
            time.monotonic() > min(limit.deadline for limit in self.limits)


_local = threading.local()
_watched: dict[int, _Thread] = {}  # threads other than the main one with a call in progress
_condition = threading.Condition()
_watchdog: threading.Thread | None = None
# PyThreadState_SetAsyncExc(thread, exception): raise in another thread at its next check (a call, a
# backward jump). Through pythonapi, so the interpreter lock is held across it. (Passing NULL to drop a
# pending one leaves CPython 3.11 re-checking forever: a pending stop is caught instead, `_checkpoint`.)
_set_async_exc = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_ulong, ctypes.py_object)(
    ("PyThreadState_SetAsyncExc", ctypes.pythonapi))


def _state() -> _Thread:
    state = getattr(_local, "state", None)
    if state is None:
        state = _local.state = _Thread()
    return state


def check() -> None:
    """Raise TimeLimit if the current thread is running the learner's code past its deadline; called
    at watched events (a forward, a backward, a torch call), so a stop lands in torch code too."""
    state = getattr(_local, "state", None)
    if state is not None and state.limits and state.must_stop():
        _stop(state, sys._getframe(1))


def call(seconds: float, function: Callable[..., T], *args, **kwargs) -> T:
    """`function(*args, **kwargs)`, stopped with TimeLimit once `seconds` have passed (see the module
    docstring for what can and cannot be stopped). Whatever it raises is raised; nothing else is."""
    state = _state()
    limit = _Limit(time.monotonic() + seconds)
    _push(state, limit)
    try:
        limit.frame = sys._getframe()
        limit.inside = True  # from here a stop may be raised
        try:
            return function(*args, **kwargs)
        finally:
            limit.inside = False  # first, before any call: no stop is raised from here on
            if not state.main:
                try:  # a stop the watchdog fired just before lands at this call's check, and is dropped
                    _checkpoint()
                except TimeLimit:
                    pass
            if os.getpid() != state.pid:
                os._exit(0)  # a child the learner's code forked: it ends here, never reaching the caller's verdict
    finally:
        _pop(state, limit)


def _checkpoint() -> None:
    """Nothing: calling it is a check where a pending asynchronous stop is raised."""


def _push(state: _Thread, limit: _Limit) -> None:
    if not state.limits:
        state.previous_trace = sys.gettrace()  # a debugger's or coverage's, given back after
    if not state.main:
        with _condition:  # the watchdog reads the limits under it
            state.limits.append(limit)
            _watched[state.ident] = state
            _start_watchdog()
            _condition.notify_all()
        return
    state.limits.append(limit)
    if len(state.limits) == 1:
        state.previous_alarm = (signal.signal(signal.SIGALRM, _on_alarm), signal.getitimer(signal.ITIMER_REAL))
    _set_alarm(state)


def _pop(state: _Thread, limit: _Limit) -> None:
    if not state.main:
        with _condition:
            state.limits.remove(limit)
            if not state.limits:
                _watched.pop(state.ident, None)
            _condition.notify_all()
    else:
        state.limits.remove(limit)
        if state.limits:
            _set_alarm(state)
        elif state.previous_alarm is not None:
            handler, (delay, interval) = state.previous_alarm
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, handler)
            if delay or interval:  # someone else's timer, put back (what remains of it is not tracked)
                signal.setitimer(signal.ITIMER_REAL, delay or interval, interval)
            state.previous_alarm = None
    if not state.limits:
        for frame, trace in state.armed.values():
            frame.f_trace = trace
        state.armed.clear()
        if sys.gettrace() is not state.previous_trace:
            sys.settrace(state.previous_trace)


def _set_alarm(state: _Thread) -> None:
    left = min(limit.deadline for limit in state.limits) - time.monotonic()
    signal.setitimer(signal.ITIMER_REAL, max(left, 1e-4), TICK_S)


def _on_alarm(signum, frame) -> None:
    state = getattr(_local, "state", None)
    if state is not None and state.limits and state.must_stop():
        _stop(state, frame)


def _stop(state: _Thread, frame) -> None:
    """Arm the line tracer on the stack from `frame` up, then raise."""
    _arm(state, frame)
    raise TimeLimit()


def _arm(state: _Thread, frame) -> None:
    """Set the line tracer on each frame from `frame` up to the innermost `call`, and on the thread."""
    until = state.limits[-1].frame
    while frame is not None and frame is not until:
        if id(frame) not in state.armed:
            state.armed[id(frame)] = (frame, frame.f_trace)
        frame.f_trace, frame.f_trace_lines = _tracer, True
        frame = frame.f_back
    sys.settrace(_tracer)


def _tracer(frame, event, arg):
    """Past the deadline, raise at each line of the learner's own code (CPython then removes the
    tracer, which the next alarm or watched event arms again)."""
    if event == "line" and learners_code(frame.f_code.co_filename):
        state = getattr(_local, "state", None)
        if state is not None and state.limits and state.must_stop():
            raise TimeLimit()
    return _tracer


def _start_watchdog() -> None:
    global _watchdog
    if _watchdog is None or not _watchdog.is_alive():  # also after a fork: threads do not survive it
        _watchdog = threading.Thread(target=_watch, name="time-limit-watchdog", daemon=True)
        _watchdog.start()


def _watch() -> None:
    """Raise TimeLimit in each watched thread running the learner's code past its deadline, then every
    TICK_S while it still runs it."""
    with _condition:  # the threads change their limits only under it
        while True:
            now, soonest = time.monotonic(), math.inf
            for ident, state in list(_watched.items()):
                if not state.limits:
                    continue
                deadline = min(limit.deadline for limit in state.limits)
                if now <= deadline:
                    soonest = min(soonest, deadline)
                elif state.limits[-1].inside:  # read and fired with no Python call between
                    _set_async_exc(ident, TimeLimit)
                    soonest = min(soonest, now + TICK_S)
            _condition.wait(None if soonest == math.inf else max(soonest - now, 0.001))


def _after_fork_in_child() -> None:
    """In a child forked inside `call`: it has no watchdog and no alarm; arm its own alarm."""
    global _watchdog, _condition
    _watchdog, _condition = None, threading.Condition()
    _watched.clear()
    state = getattr(_local, "state", None)
    if state is not None and state.limits:
        state.ident, state.main = threading.get_ident(), True  # the forking thread is the child's only one
        if state.previous_alarm is None:
            state.previous_alarm = (signal.signal(signal.SIGALRM, _on_alarm), (0.0, 0.0))
        _set_alarm(state)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
