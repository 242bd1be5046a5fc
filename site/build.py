"""`make site`: the book site, built offline from the committed notebooks (never re-executed: nbval proves them).

Each notebook is copied for the page, changed only where a page without a kernel would lose something:
- the badge row and the install cell (tools/install_cell.py tags them) are left out: the page's launch buttons
  open the notebook on Binder and Colab, and the install cell runs only there;
- a widget output keeps the picture or HTML it carries and drops its widget view, which a static page shows as an
  empty <script> (no widget state is saved); a progress bar (tqdm), saved at 0 %, is left out;
- where site/interactive.py exists, its `snippets(out_dir)` gives (notebook stem, cell id) -> an HTML block that
  replaces that cell's widget output; the block's files go to out_dir = <source>/_static/interactive/, which the
  site serves at the URL prefix `_static/interactive/` from its root;
- an HTML anchor `<a id="name"></a>` (JupyterLab follows it) becomes a MyST target `(name)=` that Sphinx resolves,
  and a link `notebook.ipynb#name` to it a link to that target; a link to a heading by JupyterLab's id (its text,
  spaces as '-', the case kept) links to MyST's id of that heading (GitHub's slug: lower case, no punctuation).
Then Sphinx (MyST-NB, sphinx-book-theme) writes the pages to build/site/html with warnings as errors.
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import re
import shutil
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

import nbformat
from markdown_it import MarkdownIt
from mdit_py_plugins.dollarmath import dollarmath_plugin
from myst_parser.slugs import github_slugify, unique_slug
from sphinx.cmd.build import build_main

from widgets.research.references import REFERENCES

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))  # file order is the tiers' order: start, beginner, ...
OUT = ROOT / "build" / "site"
WIDGET = "application/vnd.jupyter.widget-view+json"
PROGRESS_BAR = re.compile(r"\d+%\|.*\| *\d+/\d+ \[")  # tqdm's text: "updates:   0%|          | 0/150 [00:00<?, ?it/s]"
ANCHOR = re.compile(r'^<a id="([\w-]+)"></a>\s*$', re.M)
LINK_TO_ANCHOR = re.compile(r"\]\(([\w-]+\.ipynb)?#([^)\s]+)\)")
MARKDOWN = MarkdownIt("commonmark").use(dollarmath_plugin)  # as MyST reads a heading: its maths is no text
INTERACTIVE_DIR = Path("_static", "interactive")
HOSTED_ONLY = {"lab-badges", "lab-install"}  # tools/install_cell.py's tags


def page_outputs(outputs: list, snippet: str | None) -> list:
    """A code cell's outputs as a static page shows them: `snippet` (HTML) in place of the first widget output, else
    each widget output's own picture or HTML without the widget view; progress bars left out."""
    kept = []
    for output in outputs:
        data = output.get("data", {})
        fallback = {k: v for k, v in data.items() if k != WIDGET}
        if WIDGET not in data:
            kept.append(output)
        elif snippet is not None:
            kept.append(nbformat.v4.new_output("display_data", data={"text/html": snippet}))
            snippet = None
        elif fallback and not (fallback.keys() == {"text/plain"} and PROGRESS_BAR.search(fallback["text/plain"])):
            kept.append(nbformat.from_dict({**output, "data": fallback}))
    return kept


def with_targets(markdown: str, stem: str, anchors: set[str], headings: dict[str, dict[str, str]]) -> str:
    """`markdown` of notebook `stem` with each HTML anchor a MyST target, and each link to one of `anchors` or to a
    heading by its JupyterLab id (`headings`: notebook stem -> JupyterLab id -> MyST id) a link MyST resolves."""

    def resolved(link: re.Match) -> str:
        notebook, name = link[1], link[2]
        if name in anchors:
            return f"](#{name})"
        slug = headings[Path(notebook).stem if notebook else stem].get(name)
        return f"]({notebook or ''}#{slug})" if slug else link[0]

    return LINK_TO_ANCHOR.sub(resolved, ANCHOR.sub(r"(\1)=", markdown))


def html_anchors(notebooks: dict) -> set[str]:
    """The names of the HTML anchors in the notebooks' markdown cells (Sphinx's labels are global)."""
    return {name for nb in notebooks.values() for cell in nb.cells if cell.cell_type == "markdown"
            for name in ANCHOR.findall(cell.source)}


def heading_ids(nb) -> dict[str, str]:
    """JupyterLab's id of each heading of `nb` (its text, spaces as '-') -> MyST's (myst_heading_anchors)."""
    ids, slugs = {}, set()
    for cell in nb.cells:
        tokens = MARKDOWN.parse(cell.source) if cell.cell_type == "markdown" else []
        for opening, inline in zip(tokens, tokens[1:]):
            if opening.type == "heading_open":
                title = "".join(t.content for t in inline.children or [] if t.type in ("text", "code_inline"))
                slugs.add(slug := unique_slug(github_slugify(title), slugs))
                ids.setdefault(title.replace(" ", "-"), slug)
    return ids


def for_the_page(nb, stem: str, snippets: dict, anchors: set[str], headings: dict[str, dict[str, str]]):
    """A copy of notebook `nb` (file stem `stem`) as its page shows it."""
    nb = nbformat.from_dict(nb)
    nb.metadata.pop("widgets", None)
    nb.cells = [cell for cell in nb.cells if not HOSTED_ONLY & set(cell.metadata.get("tags", []))]
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            cell.source = with_targets(cell.source, stem, anchors, headings)
        elif cell.cell_type == "code":
            cell.outputs = page_outputs(cell.outputs, snippets.get((stem, cell.get("id"))))
            for output in cell.outputs:  # a markdown output (developer_3's table) links to the targets too
                if "text/markdown" in output.get("data", {}):
                    output.data["text/markdown"] = with_targets(output.data["text/markdown"], stem, anchors, headings)
    return nb


def references_page() -> str:
    """The works the notebooks cite (widgets/research/references.bib), as a page."""
    works = "\n".join(f"- {text}" for text in REFERENCES.values())
    return f"# References\n\nThe works the notebooks cite, from `widgets/research/references.bib`.\n\n{works}\n"


def interactive_snippets(out_dir: Path) -> dict:
    """site/interactive.py's blocks, if that file exists (the explorer and the bricks without a kernel)."""
    path = HERE / "interactive.py"
    if not path.exists():
        return {}
    spec = importlib.util.spec_from_file_location("site_interactive", path)
    module = sys.modules[spec.name] = importlib.util.module_from_spec(spec)  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module.snippets(out_dir)


def check_hub(hub: str) -> str:
    """`hub` if it is a JupyterHub's address (http(s)://host[:port][/path]), else a ValueError naming HUB."""
    parts = urlsplit(hub)
    if (parts.scheme not in ("http", "https") or not parts.hostname or parts.query or parts.fragment
            or re.search(r"[\s\"'<>\\]", hub)):
        raise ValueError(f"HUB must be a JupyterHub's address, http(s)://host[:port][/path], got {hub!r}")
    return hub.rstrip("/")


def build(out: Path = OUT, hub: str = "") -> Path:
    """Prepare the pages under out/source and build the site into out/html; returns the html folder."""
    source, html = out / "source", out / "html"
    shutil.rmtree(source, ignore_errors=True)
    (source / INTERACTIVE_DIR).mkdir(parents=True)
    for name in ("conf.py", "index.md"):
        shutil.copy(HERE / name, source / name)
    (source / "references.md").write_text(references_page(), encoding="utf-8")
    notebooks = {path.stem: nbformat.read(path, as_version=4) for path in NOTEBOOKS}
    anchors, headings = html_anchors(notebooks), {stem: heading_ids(nb) for stem, nb in notebooks.items()}
    snippets = interactive_snippets(source / INTERACTIVE_DIR)
    for stem, nb in notebooks.items():
        nbformat.write(for_the_page(nb, stem, snippets, anchors, headings), source / f"{stem}.ipynb")
    os.environ["LAB_SITE_HUB"] = check_hub(hub) if hub else ""
    status = build_main(["-W", "-n", "--keep-going", "-q", "-b", "html", "-d", str(out / "doctrees"),
                         str(source), str(html)])
    if status:
        raise SystemExit(f"the site did not build (Sphinx exit {status}): the warnings above say why")
    return html


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT, help="folder for the sources and the pages (git-ignored)")
    parser.add_argument("--hub", default=os.environ.get("LAB_SITE_HUB", ""),
                        help="a JupyterHub's address for a launch button (make site HUB=https://...)")
    args = parser.parse_args()
    try:
        hub = check_hub(args.hub) if args.hub else ""
    except ValueError as error:
        sys.exit(str(error))
    start = time.perf_counter()
    html = build(args.out, hub)
    print(f"The site is in {html} ({time.perf_counter() - start:.0f} s): open {html / 'index.html'}")
