"""How each notebook reads: prose, numbers in it, the wait for something to touch, walls of output.

    python benchmarks/readability.py          # every notebook -> benchmarks/results/readability.json
    python benchmarks/readability.py --table  # also print the README's table

Measured from the committed notebooks, nothing run; prose is markdown without code, maths, tags and link
targets, numbers are counted as tests/test_claims.py finds them. tests/test_readability.py holds the
committed JSON equal to a fresh measurement and `TARGETS` met.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
RESULT = ROOT / "benchmarks" / "results" / "readability.json"

# The number pattern and what is not a claim, exactly as tests/test_claims.py finds them.
_spec = importlib.util.spec_from_file_location("test_claims_patterns", ROOT / "tests" / "test_claims.py")
_claims = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_claims)
NUMBER, NOT_CLAIMS = _claims.NUMBER, _claims.NOT_CLAIMS

CODE_BLOCK = re.compile(r"^\s*(```|~~~).*?^\s*\1[^\n]*$", re.M | re.S)
MATH = re.compile(r"\$\$.+?\$\$|\$[^$\n]+\$", re.S)
CODE_SPAN = re.compile(r"`[^`\n]+`")
LINK = re.compile(r"!?\[([^\]]*)\]\(([^)\s]*)(?:\s+\"[^\"]*\")?\)")
AUTOLINK = re.compile(r"<(https?://[^>\s]+)>")
TAG = re.compile(r"</?[a-zA-Z][^>]*>")
WORD = re.compile(r"[^\W_](?:[\w'’.,:/·×-]*[^\W_])?")
WIDGET = "application/vnd.jupyter.widget-view+json"
IMAGES = ("image/png", "image/jpeg", "image/svg+xml", "image/gif")
RICH = (WIDGET, *IMAGES, "text/html", "text/markdown", "text/latex")
LONG_LINE = 100

# notebook stem -> {metric: (comparison, bound)}; "max": value <= bound, "is": value == bound.
_SHARED = {"longest_plain_output": ("max", 15), "long_code_lines": ("max", 0), "ends_with_link_to_next": ("is", True)}
TARGETS: dict[str, dict[str, tuple[str, object]]] = {
    "00_start_here": {**_SHARED, "words_before_first_visual": ("max", 150)},
    "beginner_1_carrying_bricks": {**_SHARED, "prose_words": ("max", 1500), "numbers_per_100_words": ("max", 1.5)},
    "beginner_2_watch_a_model_learn": {**_SHARED, "prose_words": ("max", 1100), "numbers_per_100_words": ("max", 1.5)},
    **{stem: {**_SHARED, "numbers_per_100_words": ("max", 3.0)} for stem in (
        "developer_1_proving_equivalence", "developer_2_training_loop", "developer_3_bug_gallery",
        "developer_4_frameworks")},
}


def _text(source: object) -> str:
    return "".join(source) if isinstance(source, list) else str(source or "")


def prose(markdown: str) -> str:
    """What a learner reads of a markdown cell: no code, no maths, no tags, a link's text only."""
    markdown = CODE_BLOCK.sub(" ", markdown)
    markdown = MATH.sub(" ", markdown)
    markdown = CODE_SPAN.sub(" ", markdown)
    markdown = LINK.sub(lambda m: m.group(1), markdown)
    markdown = AUTOLINK.sub(" ", markdown)
    return TAG.sub(" ", markdown)


def words(markdown: str) -> int:
    """Prose words: runs of letters and digits, joined by apostrophes, hyphens and the like."""
    return len(WORD.findall(prose(markdown)))


def numbers(markdown: str) -> int:
    """How many numbers the markdown's prose states, each occurrence once, as tests/test_claims.py finds
    them (its patterns after the code blocks are gone: they are not prose)."""
    markdown = CODE_BLOCK.sub(" ", markdown)
    for pattern in NOT_CLAIMS:
        markdown = pattern.sub(" ", markdown)
    return len(NUMBER.findall(markdown))


def links(markdown: str) -> list[str]:
    """The targets of the markdown's links (images excluded)."""
    markdown = CODE_BLOCK.sub(" ", markdown)
    found = [m.group(2) for m in LINK.finditer(markdown) if not m.group(0).startswith("!")]
    return found + AUTOLINK.findall(markdown)


def _plain_lines(output: dict) -> int:
    kind = output.get("output_type")
    if kind == "stream":
        return len(_text(output.get("text")).rstrip("\n").splitlines())
    if kind == "error":
        return sum(len(line.splitlines()) for line in output.get("traceback", []))
    data = output.get("data", {})
    if any(mime in data for mime in RICH):
        return 0
    return len(_text(data.get("text/plain")).rstrip("\n").splitlines())


INLINE_IMAGE = "<img src=\"data:image/"  # a picture shown as HTML, with its text alternative (widgets.draw.stills)


def _has_visual(cell: dict) -> bool:
    return any(WIDGET in o.get("data", {}) or any(m in o.get("data", {}) for m in IMAGES)
               or INLINE_IMAGE in _text(o.get("data", {}).get("text/html"))
               for o in cell.get("outputs", []))


def reading_order() -> list[str]:
    return sorted(p.stem for p in NOTEBOOKS.glob("*.ipynb"))


def next_notebook(stem: str, order: list[str]) -> str:
    return order[(order.index(stem) + 1) % len(order)]


def measure(path: Path, order: list[str]) -> dict:
    """The readability of one notebook (see the module docstring). The badge row and the install cell
    above every notebook (tools/install_cell.py) are the same everywhere, not the lesson: left out."""
    cells = [c for c in json.loads(path.read_text())["cells"]
             if not {"lab-badges", "lab-install"} & set(c.get("metadata", {}).get("tags", []))]
    markdown = [_text(c["source"]) for c in cells if c["cell_type"] == "markdown"]
    prose_words = sum(words(m) for m in markdown)
    before, seen_visual = 0, False
    for cell in cells:
        if cell["cell_type"] == "code" and _has_visual(cell):
            seen_visual = True
            break
        if cell["cell_type"] == "markdown":
            before += words(_text(cell["source"]))
    code = [line for c in cells if c["cell_type"] == "code" for line in _text(c["source"]).splitlines()]
    last = cells[-1] if cells else {"cell_type": "code", "source": ""}
    target = next_notebook(path.stem, order)
    last_links = links(_text(last["source"])) if last["cell_type"] == "markdown" else []
    return {
        "prose_words": prose_words,
        "numbers_per_100_words": round(100 * sum(numbers(m) for m in markdown) / max(prose_words, 1), 2),
        "words_before_first_visual": before if seen_visual else None,
        "longest_plain_output": max((sum(_plain_lines(o) for o in c.get("outputs", [])) for c in cells
                                     if c["cell_type"] == "code"), default=0),
        "long_code_lines": sum(len(line) > LONG_LINE for line in code),
        "markdown_links": sum(len(links(m)) for m in markdown),
        "ends_with_link_to_next": any(Path(t.split("#")[0]).stem == target for t in last_links),
    }


def measure_all() -> dict[str, dict]:
    order = reading_order()
    return {stem: measure(NOTEBOOKS / f"{stem}.ipynb", order) for stem in order}


def misses(stem: str, metrics: dict) -> list[str]:
    """The targets this notebook misses, each as 'metric = value (target: ...)'."""
    out = []
    for metric, (kind, bound) in TARGETS.get(stem, {}).items():
        value = metrics[metric]
        ok = value == bound if kind == "is" else value is not None and value <= bound
        if not ok:
            out.append(f"{metric} = {value} (target: {'' if kind == 'is' else '<= '}{bound})")
    return out


COLUMNS = {  # metric -> the README's column header
    "prose_words": "prose words",
    "numbers_per_100_words": "numbers / 100 words",
    "words_before_first_visual": "words before the first widget or figure",
    "longest_plain_output": "longest plain output (lines)",
    "long_code_lines": "code lines > 100 chars",
    "markdown_links": "links",
    "ends_with_link_to_next": "ends with a link onward",
}


def table(results: dict[str, dict], stems: list[str] | None = None) -> str:
    """The README's Markdown table of these notebooks (all by default)."""
    def cell(value: object) -> str:
        return "–" if value is None else ("yes" if value is True else "no" if value is False else f"{value:g}")

    rows = ["| notebook | " + " | ".join(COLUMNS.values()) + " |", "|---|" + "---:|" * len(COLUMNS)]
    for stem in stems or list(results):
        rows.append(f"| `{stem}` | " + " | ".join(cell(results[stem][m]) for m in COLUMNS) + " |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--table", action="store_true", help="print the README's table of the targeted notebooks")
    args = parser.parse_args(argv)
    results = measure_all()
    RESULT.write_text(json.dumps({"notebooks": results}, indent=1, ensure_ascii=False) + "\n")
    for stem, metrics in results.items():
        missed = misses(stem, metrics)
        print(f"{stem:40} {'ok' if not missed else 'MISSES ' + '; '.join(missed)}")
    if args.table:
        print(table(results, list(TARGETS)))
    print(f"written to {RESULT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
