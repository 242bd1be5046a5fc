"""`cite(...)`: the works the researcher notebooks cite, read from references.bib, as plain text or markdown links."""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

BIB = Path(__file__).with_name("references.bib")
LINK = re.compile(r"\[([^]]+)\]\((https://[^)]+)\)")  # a link inside a field: [phrase](https address)


def read_bib(path: Path = BIB) -> dict[str, dict[str, str]]:
    """key -> {field: value} of each entry, fields on one nesting level of braces, whitespace collapsed."""
    entries = re.findall(r"@\w+\{([^,\s]+),(.*?)\n\}", path.read_text(encoding="utf-8"), re.S)
    return {key: {name.lower(): " ".join(value.replace("{", "").replace("}", "").split()) for name, value in
                  re.findall(r"(\w+)\s*=\s*\{((?:[^{}]|\{[^{}]*\})*)\}", body)} for key, body in entries}


def markdown(work: dict[str, str]) -> str:
    """How a work is cited, its address on the work itself ("arXiv:...", the journal or the title) first."""
    if "year" in work:  # a paper: "Ioffe and Szegedy (2015), Title, arXiv:1502.03167"
        names = work["author"].split(" and ")
        if names[-1] == "others":
            authors = ", ".join(names[:-1]) + " et al."
        else:
            authors = " and ".join(filter(None, [", ".join(names[:-1]), names[-1]]))
        where = (f"[arXiv:{work['eprint']}](https://arxiv.org/abs/{work['eprint']})" if "eprint" in work else
                 f"[{work['journal']} {work['volume']}({work['number']})](https://doi.org/{work['doi']})")
        text = f"{authors} ({work['year']}), {work['title']}, {where}"
    else:  # a thread, a page: "owner/repo issue #N", linked
        title = f"[{work['title']}]({work['url']})" if "url" in work else work["title"]
        text = ", ".join(filter(None, [work.get("organization"), title]))
    note = f" ({work['note']})" if "note" in work else ""
    return f"{text}{note}{work.get('addendum', '')}."


def plain(text: str) -> str:
    """`text` with each markdown link as its phrase."""
    return LINK.sub(r"\1", text)


REFERENCES = {key: markdown(work) for key, work in read_bib().items()}


@dataclass(frozen=True)
class Citations:
    """A numbered list of works: plain text when printed, markdown links when a notebook shows it."""

    keys: tuple[str, ...]

    def __str__(self) -> str:
        return "\n".join(f"[{i}] {plain(REFERENCES[k])}" for i, k in enumerate(self.keys, 1))

    __repr__ = __str__

    def _repr_markdown_(self) -> str:
        return "\n".join(f"{i}. {REFERENCES[k]}" for i, k in enumerate(self.keys, 1))


def cite(*keys: str) -> Citations:
    """The listed works for `keys`, numbered in the order given."""
    if not keys:
        raise ValueError(f"keys must name at least one work, from {sorted(REFERENCES)}")
    unknown = [k for k in keys if k not in REFERENCES]
    if unknown:
        raise ValueError(f"keys: unknown work(s) {unknown}; known: {sorted(REFERENCES)}")
    return Citations(keys)
