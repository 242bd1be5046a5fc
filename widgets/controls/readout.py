"""A readout as an HTML list: each verdict in bold colour and also marked ✓ or ✗, never colour alone."""
from __future__ import annotations

import html
from typing import Iterable

from widgets.draw.style import RIGHT_TEXT, WRONG_TEXT

_MARKS = {": True": (RIGHT_TEXT, " ✓"), ": False": (WRONG_TEXT, " ✗")}  # 4.5:1 on white


def verdict_list_html(lines: Iterable[str], verdicts: tuple[str, ...]) -> str:
    """`lines` as a <ul>; each "<verdict>: True/False" of `verdicts`, and a line ending on ✓ or ✗, coloured."""
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
