"""A folder is a layer: each sub-package of `widgets` may import only the layers below it.

One fresh interpreter imports every module, the lowest layers first, and records what each
import newly brought into `sys.modules`. Because the pure layers go first, "matplotlib appeared
while importing widgets.core.training" can only mean that module (or something it imports) pulled
it in. A second, static pass reads each module's import statements, so that a lazy import inside
a function is caught too.
"""
import ast
import json
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import widgets

PACKAGE_DIR = Path(widgets.__file__).parent
PURE = ("core", "research", "audit", "exercises")  # torch and the standard library only
ORDER = ("lab", *PURE, "draw", "controls")  # lab first: the probe would not see it import torch after core
FORBIDDEN = {  # layer -> third-party packages and lab layers it must not import
    "lab": ("torch", "matplotlib", "ipywidgets", "widgets.draw", "widgets.controls"),  # the doctor must run when those are broken
    **{layer: ("matplotlib", "ipywidgets", "widgets.draw", "widgets.controls") for layer in PURE},
    "draw": ("ipywidgets", "widgets.controls"),
    "controls": (),
}


def _modules() -> list[str]:
    names = [m.name for m in pkgutil.walk_packages([str(PACKAGE_DIR)], prefix="widgets.")]
    layer = lambda name: name.split(".")[1]  # noqa: E731
    return sorted(names, key=lambda n: (ORDER.index(layer(n)) if layer(n) in ORDER else -1, n))


_PROBE = """
import importlib, json, sys
report = {}
for name in json.loads(sys.argv[1]):
    before = set(sys.modules)
    importlib.import_module(name)
    report[name] = sorted({m.split('.')[0] if not m.startswith('widgets.') else '.'.join(m.split('.')[:2])
                           for m in set(sys.modules) - before})
print(json.dumps(report))
"""


@pytest.fixture(scope="module")
def imported_by() -> dict[str, list[str]]:
    """module -> the top-level packages and lab layers that first appeared when it was imported."""
    names = ["widgets", *_modules()]
    result = subprocess.run([sys.executable, "-c", _PROBE, json.dumps(names)],
                            capture_output=True, text=True, check=True)
    return json.loads(result.stdout)


def test_every_module_sits_in_a_layer_folder():
    loose = [p.name for p in PACKAGE_DIR.glob("*.py") if p.name != "__init__.py"]
    assert loose == [], f"modules at the top of widgets/ belong in a layer folder: {loose}"
    assert {m.split(".")[1] for m in _modules()} <= set(ORDER)


def test_import_widgets_is_light(imported_by):
    assert not {"matplotlib", "ipywidgets", "torch"} & set(imported_by["widgets"])


@pytest.mark.parametrize("layer", ORDER)
def test_layer_pulls_in_nothing_above_it(layer, imported_by):
    bad = {name: sorted(set(new) & set(FORBIDDEN[layer]))
           for name, new in imported_by.items() if name.startswith(f"widgets.{layer}.") or name == f"widgets.{layer}"}
    bad = {name: found for name, found in bad.items() if found}
    assert bad == {}, f"widgets/{layer}/ may not import {FORBIDDEN[layer]}; these did: {bad}"


def _imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found |= {node.module} | {f"{node.module}.{alias.name}" for alias in node.names}
    return found


@pytest.mark.parametrize("layer", ORDER)
def test_layer_source_names_nothing_above_it(layer):
    """Also catches a lazy import inside a function, which the probe above cannot see."""
    bad = {}
    for path in sorted((PACKAGE_DIR / layer).glob("*.py")):
        hits = {m for m in _imports(path) for f in FORBIDDEN[layer] if m == f or m.startswith(f + ".")}
        if hits:
            bad[path.name] = sorted(hits)
    assert bad == {}, f"widgets/{layer}/ may not import {FORBIDDEN[layer]}; these do: {bad}"


def test_nothing_outside_controls_imports_controls():
    bad = [str(p.relative_to(PACKAGE_DIR)) for p in PACKAGE_DIR.rglob("*.py")
           if p.parent.name != "controls" and p != PACKAGE_DIR / "__init__.py"
           and any(m.startswith("widgets.controls") for m in _imports(p))]
    assert bad == []


def test_package_exposes_the_public_names_lazily():
    for name in widgets.__all__:
        assert callable(getattr(widgets, name)), name
    with pytest.raises(AttributeError, match="no_such_name"):
        widgets.no_such_name  # noqa: B018
