"""nbval as `make compat` runs it (`-p compat_nbval`): warnings on stderr set aside, a JSON line per cell.

A version may add a warning, never a verdict (the notebooks print theirs on stdout): Python's and torch's
warnings leave stderr before the comparison and are recorded in $COMPAT_RECORD with the masks that applied.
"""
from __future__ import annotations

import json
import os
import re
from pathlib import Path

WARNING_LINE = re.compile(r"^(?:\S.*:\d+: \w*Warning: |\[W\d+ [^\]]*\] )")
CONTINUATION = re.compile(r"^\s+\S")  # the source line Python prints under a warning


def split_warnings(text: str) -> tuple[str, list[str]]:
    """(text without its warnings, the warnings, each with the indented lines under it)."""
    kept, warnings, in_warning = [], [], False
    for line in text.splitlines(keepends=True):
        if WARNING_LINE.match(line):
            warnings.append(line)
            in_warning = True
        elif in_warning and CONTINUATION.match(line):
            warnings[-1] += line
        else:
            kept.append(line)
            in_warning = False
    return "".join(kept), [w.rstrip("\n") for w in warnings]


def without_warnings(outputs: list) -> tuple[list, list[str]]:
    """`outputs` (nbval's dicts) with the warnings taken out of stderr streams, and those warnings."""
    kept, found = [], []
    for output in outputs:
        if output.get("output_type") == "stream" and output.get("name") == "stderr":
            text, warnings = split_warnings(output["text"])
            found += warnings
            if not text:
                continue
            output = type(output)({**output, "text": text})
        kept.append(output)
    return kept, found


def named_masks(path: str) -> list[tuple[str, str, str]]:
    """(name, regex, replace) of each mask of a sanitize file, in its order."""
    found = re.findall(r"^\[(.+)\]\s*\n^regex: (.*)$\n^replace: (.*)$", Path(path).read_text(), re.M)
    return [(name, regex, replace) for name, regex, replace in found]


def _texts(outputs: list) -> list[str]:
    texts = []
    for output in outputs:
        texts += [v for k, v in output.items() if isinstance(v, str) and k in ("text",)]
        texts += [v for v in output.get("data", {}).values() if isinstance(v, str)]
    return texts


def pytest_configure(config):
    from nbval.plugin import IPyNbCell

    if getattr(IPyNbCell, "_compat_wrapped", False):
        return
    original = IPyNbCell.compare_outputs
    masks = named_masks(config.option.nbval_sanitize_with) if config.option.nbval_sanitize_with else []

    def compare_outputs(self, test, ref, skip_compare=None):
        test, test_warnings = without_warnings(test)
        ref, ref_warnings = without_warnings(ref)
        patterns, self.parent.sanitize_patterns = self.parent.sanitize_patterns, {}
        try:
            exact = original(self, test, ref, skip_compare)
        finally:
            self.parent.sanitize_patterns = patterns
        matched = exact or original(self, test, ref, skip_compare)
        texts = _texts(test) + _texts(ref)
        used = [] if exact else [name for name, regex, replace in masks
                                 if any(re.sub(regex, replace, t) != t for t in texts)]
        _record({"notebook": str(self.fspath.basename), "cell": self.cell_num, "matched": matched, "exact": exact,
                 "masks": used, "warnings": test_warnings, "warnings_committed": ref_warnings})
        return matched

    IPyNbCell.compare_outputs = compare_outputs
    IPyNbCell._compat_wrapped = True


def _record(entry: dict) -> None:
    path = os.environ.get("COMPAT_RECORD")
    if path:
        with open(path, "a", encoding="utf-8") as out:
            out.write(json.dumps(entry) + "\n")
