"""Where a learner's function comes from: the package's own answer handed back (directly, wrapped
or partially applied), or a wrapper that calls it. Pure Python (no torch), like the toolkit.

A checker cannot read intent, only evidence, so each verdict here is a plain fact about the
answer: it *is* a known reference object, its compiled code *is* a reference's code or was
compiled from the package's own files (a function rebuilt around a reference's `__code__`, a
partial, a bound method, a `functools.wraps` wrapper), or it *called* a reference while being
checked. Source pasted into a cell is compiled there: it counts as the learner's own and is
judged on what it computes, like any other answer.
"""
from __future__ import annotations

import functools
import os
import sys
import threading
import types
from contextlib import contextmanager
from typing import Callable, Iterator, Sequence

from widgets.core.time_limit import learners_code


_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # .../widgets


def unwrap(function: object) -> object:
    """The plain function behind a partial, a bound method or a `functools.wraps` wrapper."""
    seen = set()
    while id(function) not in seen:
        seen.add(id(function))
        try:
            if isinstance(function, functools.partial):
                function = function.func
            elif isinstance(function, types.MethodType):
                function = function.__func__
            elif getattr(function, "__wrapped__", None) is not None:
                function = function.__wrapped__
            else:
                break
        except Exception:  # a hostile object whose attributes raise: it is what it is
            break
    return function


def _code(function: object) -> types.CodeType | None:
    try:
        code = getattr(unwrap(function), "__code__", None)
    except Exception:
        return None
    return code if isinstance(code, types.CodeType) else None


def _in_package(code: types.CodeType) -> bool:
    """Compiled from one of the package's own files (not a cell, not a test)."""
    return os.path.abspath(code.co_filename).startswith(_PACKAGE + os.sep)


def describe(reference: Callable) -> str:
    """`is_update_step` (widgets.core.accumulation): how a message names a reference."""
    return f"`{reference.__name__}` ({reference.__module__})"


def handed_back(answer: object, references: Sequence[Callable]) -> str | None:
    """The sentence saying `answer` is a reference, or some other function of the package, handed back
    (directly, partially applied, bound or `functools.wraps`-wrapped); None otherwise."""
    plain, code = unwrap(answer), _code(answer)
    for reference in references:
        if plain is unwrap(reference) or (code is not None and code is _code(reference)):
            return (f"this is the package's own {describe(reference)}, handed back as the answer: "
                    "the exercise is to write it yourself")
    if code is not None and _in_package(code):
        name = getattr(plain, "__qualname__", None) or code.co_name
        module = getattr(plain, "__module__", None) or os.path.basename(code.co_filename)
        return (f"this is the package's own `{name}` ({module}), handed back as the answer: "
                "the exercise is to write it yourself")
    return None


def _from_learner(frame, checker: types.CodeType | None, checking_thread: bool) -> bool:
    """Did learner code lead to this call, since the checker started? In another thread, also when
    that thread is not one the package started (a pool's worker the answer handed a reference to)."""
    frame, root = frame.f_back, None
    while frame is not None and frame.f_code is not checker:
        if learners_code(frame.f_code.co_filename):
            return True
        if os.path.basename(frame.f_code.co_filename) != "threading.py":
            root = frame.f_code  # the outermost code the thread runs, once threading's own is left
        frame = frame.f_back
    return not checking_thread and root is not None and not _in_package(root)


@contextmanager
def calls_to(references: Sequence[Callable], checker: types.CodeType | None = None) -> Iterator[list[str]]:
    """Record which of `references` the learner's code calls while the block runs, from inside the
    function `checker` (a wrapper around a reference shows here; the checker's own calls do not).

    A profile function sees every Python call from outside, as the auditor's hooks see every
    backward pass: nothing of the learner's is patched. It is set on this thread and on every thread
    started while the block runs (a `ThreadPoolExecutor` the answer makes); a pool started before the
    check, whose threads already run, is not watched. The previous profilers are put back.
    """
    codes = {_code(r): r.__name__ for r in references if _code(r) is not None}
    seen: list[str] = []
    here, watching = threading.get_ident(), [True]

    def profile(frame, event, arg):
        if event == "call" and watching[0] and frame.f_code in codes and codes[frame.f_code] not in seen:
            if _from_learner(frame, checker, threading.get_ident() == here):
                seen.append(codes[frame.f_code])

    if not codes:  # nothing to watch for: leave the profilers alone
        yield seen
        return
    previous, previous_threads = sys.getprofile(), threading.getprofile()
    sys.setprofile(profile)
    threading.setprofile(profile)
    try:
        yield seen
    finally:
        watching[0] = False  # a thread started here may outlive the check: its profiler stays, idle
        threading.setprofile(previous_threads)
        sys.setprofile(previous)


def called_message(names: list[str], references: Sequence[Callable]) -> str:
    """The sentence for an answer that called a reference to get its result."""
    by_name = {r.__name__: r for r in references}
    named = ", ".join(describe(by_name[n]) for n in names)
    return (f"your function calls the package's {named} to get its result: that hands the package's answer "
            "back. Write the computation itself")
