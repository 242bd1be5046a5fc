"""An audit as a person reads it: one line that names each mistake and its fix, the report folded away."""
from __future__ import annotations

import html
import math
from dataclasses import dataclass

from widgets.core.mistakes import EVERY_MISTAKE


@dataclass(frozen=True)
class Verdict:
    """An audit as a person reads it: one line, then the report in full, folded away."""

    line: str
    details: str

    def _repr_html_(self) -> str:
        return (f"<p>{html.escape(self.line)}</p>\n<details><summary>the auditor's report</summary>\n"
                f"<pre>{html.escape(self.details)}</pre>\n</details>")

    def __repr__(self) -> str:
        return self.line


def verdict(report) -> Verdict:
    """`verdict(audit_training_loop(loop))`: "✓ loop matches the reference ..." or "✗ loop: ... — fix: ..."."""
    name = report.loop_name
    if report.matches_reference:
        line = f"✓ {name} matches the reference: every update is the big-batch update"
        if report.update_ratios:
            line += f" ({len(report.update_ratios)} updates, {report.num_batches} micro-batches)"
        return Verdict(line, str(report))
    said = []
    for mistake in sorted(report.mistakes):
        what, fix = EVERY_MISTAKE[mistake].does, EVERY_MISTAKE[mistake].fix
        named = "" if mistake == name else f"{mistake}: "  # a loop named after its mistake says it once
        said.append(f"{named}{what} — fix: {fix}")
    line = f"✗ {name}: " + "; ".join(said)
    if report.update_ratios and any(not math.isclose(r, 1) for r in report.update_ratios):
        factors = ", ".join("0" if r == 0 else f"{r:.3g}" for r in report.update_ratios if not math.isnan(r))
        line += f" (each update's gradient: {factors} x the reference)"
    return Verdict(line, str(report))
