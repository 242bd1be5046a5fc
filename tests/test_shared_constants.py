"""The constants several layers share are defined once, in widgets/core/shared.py.

The ignore index of cross-entropy (-100), the real-token count (targets != IGNORE_INDEX) and the
explorer's slider ranges drift apart when each module keeps its own copy. This test reads the code
of every module under widgets/ (string literals and comments left out: a hint may tell a learner
to type `ignore_index=-100`) and fails on a second definition anywhere else.
"""
from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path


import widgets

PACKAGE_DIR = Path(widgets.__file__).parent
HOME = PACKAGE_DIR / "core" / "shared.py"
COPIES = {  # what a copy looks like, in code tokens joined by one space
    "IGNORE_INDEX defined": re.compile(r"\bIGNORE_INDEX (: [^=]*)?= "),
    "-100 compared (use real_tokens or IGNORE_INDEX)": re.compile(r"[!=]= - 100\b"),
    "ignore_index=-100 (use IGNORE_INDEX)": re.compile(r"\bignore_index = - 100\b"),
    "a slider range defined": re.compile(r"\b(K|B|LR)_RANGE (: [^=]*)?= \("),
    "the clip options defined": re.compile(r"\bCLIP_OPTIONS (: [^=]*)?= \("),
}
_PROSE = {tokenize.STRING, tokenize.COMMENT, getattr(tokenize, "FSTRING_MIDDLE", tokenize.STRING)}


def code_lines(source: str) -> dict[int, str]:
    """line -> its code tokens joined by one space, string literals and comments left out."""
    lines: dict[int, list[str]] = {}
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type not in _PROSE and token.string.strip():
            lines.setdefault(token.start[0], []).append(token.string)
    return {number: " ".join(tokens) for number, tokens in lines.items()}


def copies_in(source: str) -> list[str]:
    """'line: what' for each shared constant that `source` defines or spells out again."""
    return [f"{number}: {what}" for number, code in code_lines(source).items()
            for what, pattern in COPIES.items() if pattern.search(code)]


def test_the_patterns_find_the_definitions_in_shared():
    found = copies_in(HOME.read_text())
    assert [f.split(": ", 1)[1] for f in found] == (["IGNORE_INDEX defined"] + ["a slider range defined"] * 3
                                                         + ["the clip options defined"]), found


def test_the_patterns_find_copies_and_leave_prose_alone():
    source = (
        "IGNORE_INDEX = -100  # a copy\n"
        "count = int((labels != -100).sum())\n"
        "loss = cross_entropy(x, y, ignore_index=-100)\n"
        "K_RANGE = (1, 16)\n"
        "HINT = 'count only labels != -100, with ignore_index=-100'  # IGNORE_INDEX = -100 in a comment\n"
        "tokens = real_tokens(labels); loss = cross_entropy(x, y, ignore_index=IGNORE_INDEX)\n"
        "if IGNORE_INDEX == other: pass\n")
    assert copies_in(source) == ["1: IGNORE_INDEX defined", "2: -100 compared (use real_tokens or IGNORE_INDEX)",
                                 "3: ignore_index=-100 (use IGNORE_INDEX)", "4: a slider range defined"]


def test_no_module_outside_shared_holds_a_copy():
    found = {str(path.relative_to(PACKAGE_DIR.parent)): hits for path in sorted(PACKAGE_DIR.rglob("*.py"))
             if path != HOME and (hits := copies_in(path.read_text()))}
    assert found == {}, f"import these from widgets.core.shared instead: {found}"
