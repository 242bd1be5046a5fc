"""A folder is a layer, and LAYERS below is the one statement of what each layer may import.

A row lists what the modules of one folder of `widgets/` may import besides the standard library
and their own folder: lower layers (`widgets.core`) or single modules of one (`widgets.core.config`),
and third-party packages by their top-level name. widgets/__init__.py, widgets/lab/__init__.py and
the README quote the rows; a test here keeps the quotes equal to them.

Two passes check every module against its row:
- static: every import in the source, wherever it sits (top level, inside a function or a `try`),
  relative ones resolved, and lazy ones through `importlib.import_module("a.literal.name")`;
- at run time: one fresh interpreter imports every module and records which of torch, matplotlib
  and ipywidgets (GUARDED) each import newly brought into `sys.modules`. A layer may bring in the
  guarded packages its row names, directly or through the layers it names; the layers that may
  bring in fewer are imported first, so "matplotlib appeared while importing
  widgets.core.training" can only mean that module (or what it imports) pulled it in.
"""
from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import widgets

PACKAGE_DIR = Path(widgets.__file__).parent
ROOT = PACKAGE_DIR.parent

# layer -> what its modules may import, besides the standard library and their own folder.
LAYERS: dict[str, tuple[str, ...]] = {
    "core": ("torch",),
    # torch-free at import, so that `widgets.doctor()` works where torch is broken: core's two
    # torch-free modules only (a module named here must stay light; the run-time pass checks it).
    "lab": ("jupyter_core", "widgets.core.config", "widgets.core.shared"),
    "research": ("torch", "widgets.core"),
    "audit": ("torch", "accelerate", "pytorch_lightning", "widgets.core"),  # and the frameworks it audits
    "exercises": ("torch", "widgets.core", "widgets.lab", "widgets.research", "widgets.audit"),
    "draw": ("torch", "matplotlib", "PIL", "widgets.core", "widgets.research"),
    "controls": ("torch", "matplotlib", "ipywidgets", "widgets.core", "widgets.lab", "widgets.research",
                 "widgets.audit", "widgets.exercises", "widgets.draw"),
}
GUARDED = ("torch", "matplotlib", "ipywidgets")  # the heavy imports the run-time pass watches


# --- the rule ---------------------------------------------------------------------------------

def allowed(layer: str, name: str) -> bool:
    """Whether a module of `layer` may import the dotted `name` (LAYERS' row, the standard library,
    its own folder). `from widgets import x` counts as `widgets.x`: a layer never imports the lazy
    names at the top of the package."""
    top, *rest = name.split(".")
    if top != "widgets":
        return top in sys.stdlib_module_names or top in LAYERS[layer]
    return bool(rest) and (rest[0] == layer or any(
        name == entry or name.startswith(entry + ".") for entry in LAYERS[layer] if entry.startswith("widgets.")))


def reach(layer: str) -> set[str]:
    """The GUARDED packages importing `layer` may bring in: its row's, and those of the layers it
    names whole (a single module it names must bring in none)."""
    found = {entry for entry in LAYERS[layer] if entry in GUARDED}
    for entry in LAYERS[layer]:
        if entry.startswith("widgets.") and entry.count(".") == 1:
            found |= reach(entry.split(".")[1])
    return found


def probe_order() -> list[str]:
    """The layers in the order the run-time pass imports them: those that may bring in fewer first."""
    return sorted(LAYERS, key=lambda layer: len(reach(layer)))


def imported_names(source: str, package: str) -> list[tuple[int, str]]:
    """(line, dotted name) of every import in `source`, the text of a module in `package`.

    Import statements anywhere in the tree, relative ones resolved; `importlib.import_module(...)`
    and `__import__(...)` with a literal name. A call with a computed name is charged with every
    `widgets.…` string literal in the module (the names it picks from, such as a lazy-export table)."""
    tree = ast.parse(source)
    found, computed = [], False
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: package.count(".") + 2 - node.level]
                base = ".".join(anchor + ([node.module] if node.module else []))
            # `from widgets import core` / `from widgets.audit import x`: the name taken counts
            found += [(node.lineno, f"{base}.{alias.name}" if base.split(".")[0] == "widgets" and base.count(".") <= 1
                       else base) for alias in node.names]
        elif isinstance(node, ast.Call) and _is_import_call(node.func) and node.args:
            if isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
                found.append((node.lineno, node.args[0].value))
            else:
                computed = True
    if computed:
        found += [(node.lineno, node.value) for node in ast.walk(tree) if isinstance(node, ast.Constant)
                  and isinstance(node.value, str) and re.fullmatch(r"widgets(\.\w+)+", node.value)]
    return sorted(set(found))


def _is_import_call(func: ast.expr) -> bool:
    return (isinstance(func, ast.Attribute) and func.attr == "import_module") or (
        isinstance(func, ast.Name) and func.id in ("import_module", "__import__"))


def _module_name(path: Path, package_dir: Path) -> str:
    parts = path.relative_to(package_dir.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer_violations(package_dir: Path = PACKAGE_DIR) -> dict[str, list[str]]:
    """file -> 'line: name' of each import its layer's row does not allow, over every module in
    the layer folders of `package_dir` (a `widgets/` tree)."""
    bad = {}
    for path in sorted(package_dir.glob("*/**/*.py")):
        layer = path.relative_to(package_dir).parts[0]
        package = _module_name(path.parent / "__init__.py", package_dir)
        hits = [f"{line}: {name}" for line, name in imported_names(path.read_text(), package)
                if not allowed(layer, name)]
        if hits:
            bad[str(path.relative_to(package_dir.parent))] = hits
    return bad


# --- the table itself ---------------------------------------------------------------------------

def test_every_module_sits_in_a_layer_folder():
    loose = [p.name for p in PACKAGE_DIR.glob("*.py") if p.name != "__init__.py"]
    assert loose == [], f"modules at the top of widgets/ belong in a layer folder: {loose}"
    folders = {p.parent.name for p in PACKAGE_DIR.glob("*/__init__.py")}
    assert folders == set(LAYERS), "every folder of widgets/ has a row in LAYERS, and every row a folder"


def test_the_table_names_real_layers_and_modules():
    for layer, row in LAYERS.items():
        for entry in (e for e in row if e.startswith("widgets.")):
            parts = entry.split(".")
            assert parts[1] in LAYERS and parts[1] != layer, f"{layer}: {entry} is not another layer"
            assert (ROOT / Path(*parts)).with_suffix(".py").exists() or (ROOT / Path(*parts) / "__init__.py").exists(), entry


def test_the_table_has_no_cycle():
    below = {layer: {e.split(".")[1] for e in row if e.startswith("widgets.")} for layer, row in LAYERS.items()}
    done: list[str] = []
    while len(done) < len(below):
        ready = [layer for layer in below if layer not in done and below[layer] <= set(done)]
        assert ready, f"these layers import each other: {sorted(set(below) - set(done))}"
        done += ready


def test_the_table_keeps_the_project_rules():
    """Only controls builds widgets; only draw and controls draw; controls may use everything below."""
    assert [layer for layer, row in LAYERS.items() if "ipywidgets" in row] == ["controls"]
    assert [layer for layer, row in LAYERS.items() if "matplotlib" in row] == ["draw", "controls"]
    assert {f"widgets.{layer}" for layer in LAYERS} - {"widgets.controls"} <= set(LAYERS["controls"])
    assert "torch" not in reach("lab"), "the doctor must run where torch is broken"


# --- the rule, on made-up imports -----------------------------------------------------------------

@pytest.mark.parametrize("name", ["widgets.audit", "widgets.audit.auditor", "widgets.exercises.toolkit",
                                  "widgets.draw.frames", "widgets.controls", "widgets.lab.presets", "widgets",
                                  "widgets.make_accumulation_explorer", "matplotlib.pyplot", "ipywidgets", "numpy"])
def test_core_may_not_import(name):
    assert not allowed("core", name)


@pytest.mark.parametrize("layer, name", [("core", "torch.nn"), ("core", "widgets.core.config"), ("core", "os.path"),
                                         ("lab", "widgets.core.config"), ("research", "widgets.core.loop"),
                                         ("exercises", "widgets.audit.auditor"), ("controls", "widgets.draw.frames")])
def test_what_the_rows_allow(layer, name):
    assert allowed(layer, name)


def test_lab_may_import_only_the_torch_free_modules_of_core():
    assert not allowed("lab", "widgets.core.training") and not allowed("lab", "torch")


def test_a_core_module_importing_audit_or_exercises_is_caught(tmp_path):
    """A made-up widgets/ tree: every way of importing audit or exercises from core is reported."""
    core = tmp_path / "widgets" / "core"
    core.mkdir(parents=True)
    (tmp_path / "widgets" / "__init__.py").write_text("")
    (core / "__init__.py").write_text("")
    (core / "fine.py").write_text("import torch\nfrom widgets.core.config import BUGS\nfrom . import shared\n")
    (core / "bad.py").write_text(
        "import importlib\n"
        "import widgets.audit\n"
        "from widgets import exercises\n"
        "from ..audit.auditor import audit_training_loop\n"
        "def later():\n"
        "    from widgets.exercises.toolkit import Exercise\n"
        "    return importlib.import_module('widgets.exercises.developer')\n"
        "_SETS = {'x': 'widgets.audit.checks'}\n"
        "def computed(name):\n"
        "    return importlib.import_module(_SETS[name])\n")
    assert layer_violations(tmp_path / "widgets") == {"widgets/core/bad.py": [
        "2: widgets.audit", "3: widgets.exercises", "4: widgets.audit.auditor", "6: widgets.exercises.toolkit",
        "7: widgets.exercises.developer", "8: widgets.audit.checks"]}


# --- the package, against the table ----------------------------------------------------------------

def test_every_import_is_allowed_by_its_layer():
    """Static: also sees an import inside a function and a lazy `importlib.import_module`."""
    bad = layer_violations()
    assert bad == {}, f"imports their layer's row in LAYERS does not allow: {bad}"


_PROBE = """
import importlib, json, sys
report = {}
for name in json.loads(sys.argv[1]):
    before = set(sys.modules)
    importlib.import_module(name)
    report[name] = sorted({m.split('.')[0] for m in set(sys.modules) - before} & set(json.loads(sys.argv[2])))
print(json.dumps(report))
"""


@pytest.fixture(scope="module")
def brought_in() -> dict[str, list[str]]:
    """module -> the GUARDED packages that first appeared when it was imported (probe_order)."""
    paths = {layer: sorted((PACKAGE_DIR / layer).rglob("*.py")) for layer in LAYERS}
    names = ["widgets", *(_module_name(p, PACKAGE_DIR) for layer in probe_order() for p in paths[layer])]
    result = subprocess.run([sys.executable, "-c", _PROBE, json.dumps(names), json.dumps(GUARDED)],
                            capture_output=True, text=True, check=True)
    return json.loads(result.stdout)


def test_the_probe_order_is_sound():
    """Each layer may bring in everything the layers imported before it may: else a package an
    earlier layer brought in would hide a later layer's forbidden import of it."""
    order = probe_order()
    assert all(reach(a) <= reach(b) for a, b in zip(order, order[1:])), [(layer, reach(layer)) for layer in order]


def test_import_widgets_is_light(brought_in):
    assert brought_in["widgets"] == []


@pytest.mark.parametrize("layer", LAYERS)
def test_importing_a_layer_brings_in_only_what_its_row_allows(layer, brought_in):
    """The computation layers (core, research, audit, exercises, lab) leave matplotlib and
    ipywidgets out of sys.modules; lab leaves torch out too."""
    bad = {name: sorted(set(new) - reach(layer)) for name, new in brought_in.items()
           if name == f"widgets.{layer}" or name.startswith(f"widgets.{layer}.")}
    bad = {name: found for name, found in bad.items() if found}
    assert bad == {}, f"widgets/{layer}/ may bring in only {sorted(reach(layer))} at import; these brought in more: {bad}"


def test_package_exposes_the_public_names_lazily():
    for name in widgets.__all__:
        assert callable(getattr(widgets, name)), name
    with pytest.raises(AttributeError, match="no_such_name"):
        widgets.no_such_name  # noqa: B018


# --- the quotes ----------------------------------------------------------------------------------

def quoted_row(layer: str) -> str:
    """A row as the docstrings quote it: `core/       torch`, layers without the `widgets.` prefix."""
    return f"{layer + '/':<12}" + ", ".join(entry.removeprefix("widgets.") for entry in LAYERS[layer])


def test_widgets_docstring_quotes_the_table():
    block = "\n".join("    " + quoted_row(layer) for layer in LAYERS)
    assert block in widgets.__doc__, f"widgets/__init__.py's docstring should quote the table:\n{block}"


def test_lab_docstring_quotes_its_row():
    import widgets.lab

    assert quoted_row("lab") in widgets.lab.__doc__, f"widgets/lab/__init__.py should quote: {quoted_row('lab')}"


def test_readme_quotes_the_table():
    rows = dict(re.findall(r"^\| `(\w+)/` \|.*\| ([^|]*) \|$", (ROOT / "README.md").read_text(), re.MULTILINE))
    expected = {layer: ", ".join(f"`{entry.removeprefix('widgets.')}`" for entry in row) for layer, row in LAYERS.items()}
    assert rows == expected, "the README's layer table, last column, should quote LAYERS"
