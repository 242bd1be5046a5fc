"""A widget's readout as an HTML list: one sentence per line, each verdict in bold colour and also
spelled out with a mark (✓ / ✗), so that colour is never the only signal. The explorers build the
sentences; this turns them into the `HTML` widget's value.
"""
from __future__ import annotations

import html
from typing import Iterable

from widgets.draw.style import RIGHT_TEXT, WRONG_TEXT

_MARKS = {": True": (RIGHT_TEXT, " ✓"), ": False": (WRONG_TEXT, " ✗")}  # 4.5:1 on white


def verdict_list_html(lines: Iterable[str], verdicts: Iterable[str]) -> str:
    """`lines` as an HTML list; every "<verdict>: True" or "<verdict>: False" in them, for each of
    `verdicts` (e.g. "gradients allclose"), in bold bluish green with ✓ or vermillion with ✗; a line that
    ends on ✓ or ✗ (a plain readout's) has that mark coloured the same way."""
    verdicts = tuple(verdicts)
    items = []
    for line in lines:
        text = html.escape(line)
        for verdict in verdicts:
            for value, (colour, mark) in _MARKS.items():
                said = html.escape(verdict + value)
                text = text.replace(said, f"<b style='color:{colour}'>{said}{mark}</b>")
        for mark, colour in ((" ✓", RIGHT_TEXT), (" ✗", WRONG_TEXT)):  # a plain line ends on its mark
            if text.endswith(mark) and not text.endswith(f"{mark}</b>"):
                text = f"{text[:-1]}<b style='color:{colour}'>{mark.strip()}</b>"
        items.append(f"<li>{text}</li>")
    return "<ul style='margin:0'>" + "".join(items) + "</ul>"
