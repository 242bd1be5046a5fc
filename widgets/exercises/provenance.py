"""Where a learner's function comes from: the package's own answer handed back, a wrapper that
calls it, or its code copied line for line. Pure Python (no torch), like the toolkit.

A checker cannot read intent, only evidence, so each verdict here is a plain fact about the
answer: it *is* a known reference object, it *called* one while being checked, or its compiled
code is the reference's (same instructions, constants and names; comments, the docstring and
line numbers aside). A version written independently, or rewritten in one's own words, has other
names and passes; it is then judged on what it computes, like any other answer.
"""
from __future__ import annotations

import functools
import os
import sys
import types
from contextlib import contextmanager
from typing import Callable, Iterator, Sequence


_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # .../widgets


def unwrap(function: object) -> object:
    """The plain function behind a partial, a bound method or a `functools.wraps` wrapper."""
    seen = set()
    while id(function) not in seen:
        seen.add(id(function))
        if isinstance(function, functools.partial):
            function = function.func
        elif isinstance(function, types.MethodType):
            function = function.__func__
        elif getattr(function, "__wrapped__", None) is not None:
            function = function.__wrapped__
        else:
            break
    return function


def _fingerprint(code: types.CodeType) -> tuple:
    """What the compiler made of a function's body, without its docstring, file or line numbers."""
    consts = code.co_consts[1:] if code.co_consts[:1] and isinstance(code.co_consts[0], (str, type(None))) else code.co_consts
    return (code.co_code, code.co_names, code.co_varnames, code.co_argcount,
            tuple(_fingerprint(c) if isinstance(c, types.CodeType) else repr(c) for c in consts))


def _code(function: object) -> types.CodeType | None:
    return getattr(unwrap(function), "__code__", None)


def describe(reference: Callable) -> str:
    """`is_update_step` (widgets.core.accumulation): how a message names a reference."""
    return f"`{reference.__name__}` ({reference.__module__})"


def handed_back(answer: object, references: Sequence[Callable]) -> str | None:
    """The sentence saying `answer` is a reference object or a copy of one's code; None otherwise."""
    plain, code = unwrap(answer), _code(answer)
    for reference in references:
        if plain is unwrap(reference):
            return (f"this is the package's own {describe(reference)}, handed back as the answer: "
                    "the exercise is to write it yourself")
        if code is not None and _code(reference) is not None and _fingerprint(code) == _fingerprint(_code(reference)):
            return (f"this function is the package's worked answer {describe(reference)} copied line for line "
                    "(same code, same names): the check counts a version you wrote. Close the solution and "
                    "write it from memory, in your own words")
    return None


def _from_learner(frame, checker: types.CodeType | None) -> bool:
    """Did learner code (anything outside the package) lead to this call, since the checker started?"""
    frame = frame.f_back
    while frame is not None and frame.f_code is not checker:
        if not frame.f_code.co_filename.startswith(_PACKAGE):
            return True
        frame = frame.f_back
    return False


@contextmanager
def calls_to(references: Sequence[Callable], checker: types.CodeType | None = None) -> Iterator[list[str]]:
    """Record which of `references` the learner's code calls while the block runs, from inside the
    function `checker` (a wrapper around a reference shows here; the checker's own calls do not).

    A profile function sees every Python call from outside, as the auditor's hooks see every
    backward pass: nothing of the learner's is patched. The previous profiler is put back.
    """
    codes = {_code(r): r.__name__ for r in references if _code(r) is not None}
    seen: list[str] = []

    def profile(frame, event, arg):
        if event == "call" and frame.f_code in codes and codes[frame.f_code] not in seen:
            if _from_learner(frame, checker):
                seen.append(codes[frame.f_code])

    if not codes:  # nothing to watch for: leave the profiler alone
        yield seen
        return
    previous = sys.getprofile()
    sys.setprofile(profile)
    try:
        yield seen
    finally:
        sys.setprofile(previous)


def called_message(names: list[str], references: Sequence[Callable]) -> str:
    """The sentence for an answer that called a reference to get its result."""
    by_name = {r.__name__: r for r in references}
    named = ", ".join(describe(by_name[n]) for n in names)
    return (f"your function calls the package's {named} to get its result: that hands the package's answer "
            "back. Write the computation itself")
