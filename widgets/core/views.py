"""Results as a person reads them: tables that render as tables, a diff with its changed lines marked."""
from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Sequence


def _cell(value: object) -> str:
    text = value if isinstance(value, str) else f"{value:g}" if isinstance(value, float) else str(value)
    return text.replace("|", "\\|").replace("\n", " ")


@dataclass(frozen=True)
class Table:
    """A Markdown table Jupyter renders: one value per header in each row (floats as `:g`), `right`-aligned
    headers, an optional `note` under it."""

    headers: Sequence[str]
    rows: Sequence[Sequence[object]]
    right: frozenset[str] = frozenset()
    note: str = ""

    def __post_init__(self) -> None:
        width = len(self.headers)
        for row in self.rows:
            if len(row) != width:
                raise ValueError(f"each row needs {width} cells (one per header), got {len(row)}: {row!r}")

    def markdown(self) -> str:
        lines = ["| " + " | ".join(_cell(h) for h in self.headers) + " |",
                 "|" + "|".join("---:" if h in self.right else "---" for h in self.headers) + "|"]
        lines += ["| " + " | ".join(_cell(v) for v in row) + " |" for row in self.rows]
        return "\n".join(lines) + (f"\n\n{self.note}" if self.note else "")

    _repr_markdown_ = markdown  # Jupyter renders it as a table
    __repr__ = markdown  # and a plain print shows the same text


@dataclass(frozen=True)
class Diff:
    """A unified diff (lines starting '+', '-' or ' ') shown as code, the changed lines highlighted:
    red and struck through what goes, green what comes. `title` is shown above it."""

    text: str
    title: str = ""

    def _repr_html_(self) -> str:
        styles = {"+": "background:#e6f5ee", "-": "background:#fbe9e1;text-decoration:line-through"}
        rows = []
        for line in self.text.splitlines():
            style = styles.get(line[:1], "")
            rows.append(f"<span style='{style}'>{html.escape(line)}</span>" if style else html.escape(line))
        title = f"<p><code>{html.escape(self.title)}</code></p>\n" if self.title else ""
        return f"{title}<pre style='line-height:1.3'>" + "\n".join(rows) + "</pre>"

    def __repr__(self) -> str:
        return (self.title + "\n" if self.title else "") + self.text


@dataclass(frozen=True)
class Code:
    """Source code shown as a highlighted block (Markdown's fenced code), not printed text."""

    source: str
    language: str = "python"

    def _repr_markdown_(self) -> str:
        return f"```{self.language}\n{self.source.rstrip()}\n```"

    def __repr__(self) -> str:
        return self.source.rstrip()
