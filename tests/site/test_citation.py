"""The reuse terms: CITATION.cff holds what the Citation File Format 1.2.0 requires and agrees with pyproject.toml;
LICENSE names both licences it declares (code MIT, prose and figures CC BY 4.0)."""
from __future__ import annotations

from importlib import metadata
from pathlib import Path

import yaml

from widgets.lab.hosts import DISTRIBUTION, REPOSITORY

ROOT = Path(__file__).resolve().parents[2]
CITATION = yaml.safe_load((ROOT / "CITATION.cff").read_text(encoding="utf-8"))
PACKAGE = metadata.metadata(DISTRIBUTION)  # pyproject.toml's version and licence, as installed


def test_the_citation_file_has_the_required_keys():
    assert CITATION["cff-version"] == "1.2.0"
    assert {"cff-version", "message", "title", "authors"} <= CITATION.keys()
    assert CITATION["authors"] and all(isinstance(a, dict) and ("name" in a or "family-names" in a)
                                       for a in CITATION["authors"])
    assert CITATION["type"] in ("software", "dataset")


def test_the_citation_agrees_with_the_package():
    assert CITATION["version"] == PACKAGE["Version"]
    assert CITATION["repository-code"] == f"https://github.com/{REPOSITORY}"
    assert CITATION["license"] == [PACKAGE["License-Expression"], "CC-BY-4.0"]


def test_the_licence_file_names_both_licences():
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert "MIT License" in text and "Permission is hereby granted" in text
    assert "Creative Commons Attribution 4.0 International (CC BY 4.0)" in text
    assert "https://creativecommons.org/licenses/by/4.0/legalcode" in text
