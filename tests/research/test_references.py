"""The cited works: read from references.bib with their fields, every key a notebook cites exists, every work
links to an https address, an unknown key is refused, and the .bib file ships with the package."""
import ast
import fnmatch
import json
import re
from pathlib import Path

import pytest

from widgets.research.references import BIB, REFERENCES, cite, read_bib

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"
WORKS = read_bib()


def cited_keys() -> set[str]:
    keys = set()
    for notebook in NOTEBOOKS.glob("*.ipynb"):
        for cell in json.loads(notebook.read_text())["cells"]:
            for call in re.findall(r"\bcite\(([^)]*)\)", "".join(cell["source"]) if cell["cell_type"] == "code" else ""):
                keys |= set(ast.literal_eval(f"({call},)"))
    return keys


def test_every_key_a_notebook_cites_exists():
    keys = cited_keys()
    assert len(keys) > 30 and keys <= set(REFERENCES), keys - set(REFERENCES)


@pytest.mark.parametrize("key", sorted(WORKS))
def test_every_entry_has_its_fields_and_an_https_link(key):
    work = WORKS[key]
    if "year" in work:
        assert {"author", "title"} <= set(work) and re.fullmatch(r"(19|20)\d\d", work["year"])
        assert re.fullmatch(r"\d{4}\.\d{4,5}", work.get("eprint", "")) or {"journal", "doi"} <= set(work)
    else:
        assert "title" in work and ("url" in work or "](https://" in work.get("addendum", ""))
    shown = REFERENCES[key]
    for phrase, url in re.findall(r"\[([^]]+)\]\(([^)]+)\)", shown):
        assert re.fullmatch(r"https://[\w.-]+/\S+", url), f"{key}: {url!r} is not an https address"
        number = re.search(r"#(\d+)$", phrase)
        assert number is None or url.endswith("/" + number.group(1)), (key, phrase, url)
    assert "](https://" in shown and shown.endswith(".")


def test_cite_numbers_the_works_in_order_as_text_and_as_links():
    assert str(cite("ioffe2015", "thakur2005")) == (
        "[1] Ioffe and Szegedy (2015), Batch Normalization: Accelerating Deep Network Training by Reducing "
        "Internal Covariate Shift, arXiv:1502.03167.\n"
        "[2] Thakur, Rabenseifner and Gropp (2005), Optimization of Collective Communication Operations in MPICH, "
        "International Journal of High Performance Computing Applications 19(1) (the alpha-beta cost model; "
        "recursive doubling and Rabenseifner's all-reduce).")
    assert repr(cite("gao2021")) == str(cite("gao2021"))
    assert cite("radford2021", "transformers_34242")._repr_markdown_() == (
        "1. Radford et al. (2021), Learning Transferable Visual Models From Natural Language Supervision (CLIP), "
        "[arXiv:2103.00020](https://arxiv.org/abs/2103.00020).\n"
        "2. [huggingface/transformers issue #34242](https://github.com/huggingface/transformers/issues/34242) (DDP "
        "averages per-device loss means: a device with few real tokens weighs as much as one with many); fixed by "
        "[PR #34373](https://github.com/huggingface/transformers/pull/34373), the average_tokens_across_devices option.")
    assert str(cite("accelerate_ga_guide")).startswith("[1] Hugging Face Accelerate, Performing gradient accumulation")


@pytest.mark.parametrize("keys, match", [((), "at least one"), (("smith1999",), "unknown")])
def test_bad_keys_are_refused(keys, match):
    with pytest.raises(ValueError, match=match):
        cite(*keys)


def test_the_bib_file_ships_with_the_package():
    line = re.search(r'^"widgets.research" = \[(.*)\]$', (ROOT / "pyproject.toml").read_text(), re.M)[1]
    assert any(fnmatch.fnmatch(BIB.name, pattern) for pattern in ast.literal_eval(f"[{line}]"))
