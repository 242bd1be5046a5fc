"""One time limit for the learner's code the lab runs: `call(30.0, loop, ...)` stops it with `TimeLimit`.

A watchdog thread raises TimeLimit in the late thread (`PyThreadState_SetAsyncExc`, which every system
has, unlike SIGALRM) at the deadline and every TICK_S after; where it lands, a line tracer raises it
again at each line of the learner's own code, so a bare `except:` cannot keep it out. C code (one long
torch kernel) runs until it returns; a `time.sleep` in the main thread is woken by a signal where the
system has SIGALRM, and elsewhere also runs until it returns.
"""
from __future__ import annotations

import ctypes
import math
import os
import signal
import sys
import threading
import time
from dataclasses import dataclass, field
from types import FrameType
from typing import Callable, TypeVar

TIME_LIMIT_S = 30.0  # what a learner's loop or answer may take before it is stopped
TICK_S = 0.05  # past the deadline, the stop is raised again this often (a bare except: may swallow one)
_WAKE = getattr(signal, "SIGALRM", None) if hasattr(signal, "pthread_kill") else None  # None on Windows

T = TypeVar("T")


class TimeLimit(BaseException):
    """Raised in the learner's code past its time limit; a BaseException, so `except Exception` lets it through."""

    def __init__(self, *args):
        super().__init__(*args)
        # The watchdog's stop is created in the thread it lands in: arm the tracer right there.
        state = getattr(_local, "state", None)
        if state is not None and state.must_stop():
            _arm(state, sys._getframe(1))


_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep  # .../widgets/
_LIBRARIES = tuple({os.path.abspath(p) + os.sep for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)})


def learners_code(filename: str) -> bool:
    """Is code compiled from `filename` the learner's (a cell, a script, a test), not this package's or a library's?"""
    if filename.startswith("<frozen"):
        return False
    path = os.path.abspath(filename)
    return not path.startswith(_PACKAGE) and not path.startswith(_LIBRARIES)


@dataclass
class _Limit:
    """One `call` in progress: its deadline, whether the learner's code is running, and the frame of `call`."""

    deadline: float
    inside: bool = False
    frame: FrameType | None = None


@dataclass
class _Thread:
    """A thread's `call`s in progress (nested: an exercise that audits a loop), innermost last."""

    limits: list[_Limit] = field(default_factory=list)
    ident: int = field(default_factory=threading.get_ident)
    armed: dict[int, tuple] = field(default_factory=dict)  # id(frame) -> (frame, its f_trace before arming)
    previous_trace: Callable | None = None
    main: bool = field(default_factory=lambda: threading.current_thread() is threading.main_thread())
    previous_handler: object = None  # of _WAKE, in the main thread, while a call is in progress

    def must_stop(self) -> bool:
        """The innermost call is running the learner's code, and a deadline has passed."""
        return bool(self.limits) and self.limits[-1].inside and \
            time.monotonic() > min(limit.deadline for limit in self.limits)


_local = threading.local()
_watched: dict[int, _Thread] = {}  # threads with a call in progress
_condition = threading.Condition()
_watchdog: threading.Thread | None = None
# Through pythonapi, so the interpreter lock is held across it. (Passing NULL to drop a pending stop
# leaves CPython 3.11 re-checking forever: a pending stop is caught at `_checkpoint` instead.)
_set_async_exc = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_ulong, ctypes.py_object)(
    ("PyThreadState_SetAsyncExc", ctypes.pythonapi))


def check() -> None:
    """Raise TimeLimit if this thread runs the learner's code past its deadline (called at torch events)."""
    state = getattr(_local, "state", None)
    if state is not None and state.must_stop():
        raise TimeLimit()  # which arms the tracer as it is made


def call(seconds: float, function: Callable[..., T], *args, **kwargs) -> T:
    """`function(*args, **kwargs)`, stopped with TimeLimit once `seconds` have passed; whatever it raises is raised."""
    state = getattr(_local, "state", None)
    if state is None:
        state = _local.state = _Thread()
    limit = _Limit(time.monotonic() + seconds)
    if not state.limits:
        state.previous_trace = sys.gettrace()  # a debugger's or coverage's, given back after
        if state.main and _WAKE is not None:
            state.previous_handler = signal.signal(_WAKE, _on_wake)
    with _condition:  # the watchdog reads the limits under it
        state.limits.append(limit)
        _watched[state.ident] = state
        _start_watchdog()
        _condition.notify_all()
    try:
        limit.frame = sys._getframe()
        limit.inside = True  # from here a stop may be raised
        try:
            return function(*args, **kwargs)
        finally:
            limit.inside = False  # first, before any call: no stop is raised from here on
            try:  # a stop the watchdog fired just before lands at this call, and is dropped
                _checkpoint()
            except TimeLimit:
                pass
    finally:
        _pop(state, limit)


def _checkpoint() -> None:
    """Nothing: calling it is a check where a pending asynchronous stop is raised."""


def _pop(state: _Thread, limit: _Limit) -> None:
    with _condition:
        state.limits.remove(limit)
        if not state.limits:
            _watched.pop(state.ident, None)
        _condition.notify_all()
    if not state.limits:
        for frame, trace in state.armed.values():
            frame.f_trace = trace
        state.armed.clear()
        if sys.gettrace() is not state.previous_trace:
            sys.settrace(state.previous_trace)
        if state.previous_handler is not None:
            signal.signal(_WAKE, state.previous_handler)
            state.previous_handler = None


def _on_wake(signum, frame) -> None:
    """The watchdog's signal: raise out of a blocking call (a sleep) in the main thread."""
    check()


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
    """Past the deadline, raise at each line of the learner's own code (CPython then drops the tracer; the next stop arms it)."""
    if event == "line" and learners_code(frame.f_code.co_filename):
        state = getattr(_local, "state", None)
        if state is not None and state.must_stop():
            raise TimeLimit()
    return _tracer


def _start_watchdog() -> None:
    global _watchdog
    if _watchdog is None or not _watchdog.is_alive():
        _watchdog = threading.Thread(target=_watch, name="time-limit-watchdog", daemon=True)
        _watchdog.start()


def _watch() -> None:
    """Raise TimeLimit in each thread running the learner's code past its deadline, then every TICK_S while it still runs it."""
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
                    if state.previous_handler is not None and now > deadline + 1.0:  # a blocking call (a sleep)
                        signal.pthread_kill(ident, _WAKE)
                    soonest = min(soonest, now + TICK_S)
            _condition.wait(None if soonest == math.inf else max(soonest - now, 0.001))
