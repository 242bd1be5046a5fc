"""The cited works: every key the notebooks use exists, every work has an https address, an unknown key
is refused by name, and a notebook shows the list as markdown links."""
import json
import re
from pathlib import Path

import pytest

from widgets.research.references import REFERENCES, Reference, cite

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"


def test_cite_numbers_the_works_in_order():
    text = str(cite("gao2021", "ioffe2015"))
    assert text.startswith("[1] Gao") and "\n[2] Ioffe" in text
    assert repr(cite("gao2021")) == text.splitlines()[0]


def test_the_2024_bug_is_cited_with_its_threads():
    for thread in ("trl issue #2175", "transformers PR #34191", "torchtune PR #1875"):
        assert thread in REFERENCES["ga_bug_2024"].text


@pytest.mark.parametrize("key", sorted(REFERENCES))
def test_every_work_has_an_https_address_for_a_phrase_of_its_text(key):
    work = REFERENCES[key]
    assert isinstance(work, Reference) and work.links, f"{key} has no link"
    for phrase, url in work.links.items():
        assert phrase in work.text, f"{key}: {phrase!r} is not in its text"
        assert re.fullmatch(r"https://[\w.-]+/\S+", url), f"{key}: {url!r} is not an https address"
        if url.startswith("https://arxiv.org/"):
            assert re.fullmatch(r"https://arxiv\.org/abs/\d{4}\.\d{4,5}", url) and url.endswith(phrase.split(":")[-1])
        if url.startswith("https://github.com/"):
            number = re.search(r"#(\d+)$", phrase)
            assert number is None or url.endswith("/" + number.group(1)), (key, phrase, url)


def test_markdown_links_every_phrase_once_and_keeps_the_text():
    shown = cite("ga_bug_2024", "goyal2017")._repr_markdown_()
    assert shown.startswith("1. The 2024") and "\n2. Goyal" in shown
    for phrase, url in {**REFERENCES["ga_bug_2024"].links, **REFERENCES["goyal2017"].links}.items():
        assert shown.count(f"[{phrase}]({url})") == 1
    assert re.sub(r"\[([^]]+)\]\([^)]+\)", r"\1", shown.splitlines()[1]) == "2. " + REFERENCES["goyal2017"].text


@pytest.mark.parametrize("keys, match", [((), "at least one"), (("smith1999",), "unknown")])
def test_bad_keys_are_refused(keys, match):
    with pytest.raises(ValueError, match=match):
        cite(*keys)


@pytest.mark.parametrize("notebook", sorted(NOTEBOOKS.glob("researcher_*.ipynb")), ids=lambda p: p.stem)
def test_the_researcher_notebooks_show_their_references_as_links(notebook):
    cells = json.loads(notebook.read_text())["cells"]
    shown = [o for c in cells if c["cell_type"] == "code" and "cite(" in "".join(c["source"])
             for o in c["outputs"] if "text/markdown" in o.get("data", {})]
    assert shown, f"{notebook.stem}: no cell shows cite(...) as markdown"
    assert all("](https://" in "".join(o["data"]["text/markdown"]) for o in shown)
