"""What import-linter (pyproject.toml's contracts, `lint-imports`) cannot see: imports at run time."""
import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import widgets

PACKAGE_DIR = Path(widgets.__file__).parent
CONTRACTS = tomllib.loads((PACKAGE_DIR.parent / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]

_PROBE = """
import importlib, json, sys
report = {}
for name in json.loads(sys.argv[1]):
    importlib.import_module(name)
    report[name] = sorted(m for m in ("torch", "matplotlib", "ipywidgets") if m in sys.modules)
print(json.dumps(report))
"""


def brought_in(names: list[str]) -> dict[str, list[str]]:
    """name -> which of torch, matplotlib and ipywidgets are loaded once it and those before it are imported."""
    result = subprocess.run([sys.executable, "-c", _PROBE, json.dumps(names)], capture_output=True, text=True, check=True)
    return json.loads(result.stdout)


def modules_of(folder: str) -> list[str]:
    return sorted(f"widgets.{folder}.{p.stem}" for p in (PACKAGE_DIR / folder).glob("*.py") if p.stem != "__init__")


def test_every_folder_is_a_layer_of_the_contracts():
    layers = next(c["layers"] for c in CONTRACTS if c["type"] == "layers")
    named = {name.strip() for layer in layers for name in layer.split("|")}
    assert {f"widgets.{p.parent.name}" for p in PACKAGE_DIR.glob("*/__init__.py")} == named
    assert [p.name for p in PACKAGE_DIR.glob("*.py")] == ["__init__.py"]
    assert not list((PACKAGE_DIR / "lessons").glob("*/*/*.py")), "a lesson's folder is flat: one file a role"


def test_widgets_and_the_lab_load_without_torch():
    """The install cell imports widgets.lab.hosts before torch may be installed; the doctor runs where it is broken."""
    loaded = {name: found for name, found in brought_in(["widgets", "widgets.lessons", *modules_of("lab")]).items() if found}
    assert loaded == {}


def test_compute_loads_neither_matplotlib_nor_ipywidgets():
    """Also an import made with importlib at import time, which lint-imports does not see."""
    names = [name for folder in ("core", "research", "audit", "exercises") for name in modules_of(folder)]
    loaded = {name: found for name, found in brought_in(names).items() if set(found) - {"torch"}}
    assert next(iter(loaded), None) is None, f"matplotlib or ipywidgets loaded once this was imported: {loaded}"


def test_the_top_level_names_load_on_first_use():
    for name in widgets.__all__:
        assert callable(getattr(widgets, name)), name
    with pytest.raises(AttributeError, match="no_such_name"):
        widgets.no_such_name  # noqa: B018
