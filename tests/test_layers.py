"""A file's role decides what it may import, and LAYERS below is the one statement of it.

The shared folders of `widgets/` are one role each (`core`, `research`, `audit`, ...). A lesson's
folder, `widgets/lessons/<lesson>/`, holds files of four roles, told by the file's name: `draw.py`
(draws onto a given Axes), `controls*.py` (builds the widgets), `exercises.py` (the checked
exercises), and compute (every other file); its `__init__.py` is the notebook's import surface.
A row lists what a role may import besides the standard library and its own folder: shared layers
(`widgets.core`) or single modules of one (`widgets.core.config`), third-party packages by their
top-level name, and, for a lesson's roles, the same lesson's files of another role (`lesson compute`).
A lesson never imports another lesson; only a surface may name another lesson's module.
widgets/__init__.py, widgets/lab/__init__.py and the README quote the rows; a test here keeps the
quotes equal to them.

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

# role -> what its files may import, besides the standard library and their own folder (for a
# lesson's roles, own folder means: the same lesson's files of the same role).
LAYERS: dict[str, tuple[str, ...]] = {
    "core": ("torch",),
    # torch-free at import, so that `widgets.doctor()` works where torch is broken: core's three
    # torch-free modules only (a module named here must stay light; the run-time pass checks it).
    "lab": ("jupyter_core", "widgets.core.config", "widgets.core.mistakes", "widgets.core.shared"),
    "research": ("torch", "widgets.core"),
    "audit": ("torch", "widgets.core"),
    "exercises": ("torch", "widgets.core", "widgets.lab", "widgets.research", "widgets.audit"),
    "draw": ("torch", "matplotlib", "PIL", "widgets.core", "widgets.research"),
    # traitlets: ipywidgets' own traits, for a synced trait a widget lacks (controls/names.py's Picture)
    "controls": ("torch", "matplotlib", "ipywidgets", "traitlets", "widgets.core", "widgets.lab", "widgets.research",
                 "widgets.audit", "widgets.exercises", "widgets.draw"),
    # a lesson's files (widgets/lessons/<lesson>/), by role; developer_4's compute audits the frameworks
    "lesson compute": ("torch", "accelerate", "pytorch_lightning", "widgets.core", "widgets.research", "widgets.audit"),
    "lesson draw": ("torch", "matplotlib", "PIL", "widgets.core", "widgets.research", "widgets.draw",
                    "lesson compute"),
    "lesson exercises": ("torch", "widgets.core", "widgets.lab", "widgets.research", "widgets.audit",
                         "widgets.exercises", "lesson compute"),
    "lesson controls": ("torch", "matplotlib", "ipywidgets", "widgets.core", "widgets.lab", "widgets.research",
                        "widgets.audit", "widgets.exercises", "widgets.draw", "widgets.controls",
                        "lesson compute", "lesson draw", "lesson exercises"),
}
SHARED = tuple(role for role in LAYERS if not role.startswith("lesson "))
GUARDED = ("torch", "matplotlib", "ipywidgets")  # the heavy imports the run-time pass watches


# --- the rule ---------------------------------------------------------------------------------

LESSON_ROLE_FILES = (("lesson draw", ("draw",)), ("lesson controls", ("controls",)), ("lesson exercises", ("exercises",)))


def role_of(path: Path, package_dir: Path = PACKAGE_DIR) -> tuple[str, str | None]:
    """(role, lesson) of a module file of a `widgets/` tree: a shared folder's name and None, or
    ('lesson <role>', lesson) for `lessons/<lesson>/<file>.py` ('lesson surface' for its __init__.py,
    ('lessons', None) for `lessons/__init__.py`)."""
    parts = path.relative_to(package_dir).parts
    if parts[0] != "lessons":
        return parts[0], None
    if len(parts) == 2:
        return "lessons", None
    lesson, stem = parts[1], Path(parts[-1]).stem
    if stem == "__init__":
        return "lesson surface", lesson
    for role, prefixes in LESSON_ROLE_FILES:
        if stem in prefixes or any(stem.startswith(p + "_") for p in prefixes):
            return role, lesson
    return "lesson compute", lesson


def _role_of_module(name: str, package_dir: Path) -> str | None:
    """The role of the module `widgets.lessons.<lesson>.<file>` named `name` (None if it is no file)."""
    parts = name.split(".")
    path = (package_dir / Path(*parts[1:4])).with_suffix(".py")
    return role_of(path, package_dir)[0] if len(parts) >= 4 and path.exists() else None


def allowed(role: str, name: str, lesson: str | None = None, package_dir: Path = PACKAGE_DIR) -> bool:
    """Whether a module of `role` (of `lesson`, for a lesson's roles) may import the dotted `name`:
    its row in LAYERS, the standard library, its own folder (a lesson's: the same lesson's files of
    the same role). `from widgets import x` counts as `widgets.x`: nothing imports the lazy names at
    the top of the package. A surface only names modules (its table); `lessons/__init__.py` nothing."""
    top, *rest = name.split(".")
    if role == "lesson surface":
        return name == "widgets.core.surface" or (top == "widgets" and bool(rest))
    if role == "lessons":
        return False
    if top != "widgets":
        return top in sys.stdlib_module_names or top in LAYERS[role]
    if not rest:
        return False
    if rest[0] == "lessons":
        if not role.startswith("lesson ") or len(rest) < 3 or rest[1] != lesson:
            return False  # a shared layer never imports a lesson, nor a lesson another one
        other = _role_of_module(name, package_dir)
        return other == role or other in LAYERS[role]
    return (not role.startswith("lesson ") and rest[0] == role) or any(
        name == entry or name.startswith(entry + ".") for entry in LAYERS[role] if entry.startswith("widgets."))


def reach(role: str) -> set[str]:
    """The GUARDED packages importing a module of `role` may bring in: its row's, and those of the
    layers and lesson roles it names whole (a single module it names must bring in none)."""
    found = {entry for entry in LAYERS[role] if entry in GUARDED}
    for entry in LAYERS[role]:
        if entry.startswith("widgets.") and entry.count(".") == 1:
            found |= reach(entry.split(".")[1])
        elif entry.startswith("lesson "):
            found |= reach(entry)
    return found


def probe_order() -> list[str]:
    """The roles in the order the run-time pass imports them: those that may bring in fewer first."""
    return sorted(LAYERS, key=lambda role: len(reach(role)))


def imported_names(source: str, package: str) -> list[tuple[int, str]]:
    """(line, dotted name) of every import in `source`, the text of a module in `package`.

    Import statements anywhere in the tree, relative ones resolved; `importlib.import_module(...)`
    and `__import__(...)` with a literal name. A call with a computed name is charged with every
    `widgets.…` string literal in the module (the names it picks from, such as a lazy-export table),
    and so is a module whose only import machinery is `lazy_surface` (a lesson's surface)."""
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
            computed |= any(alias.name == "lazy_surface" for alias in node.names)
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
    """file -> 'line: name' of each import its role's row does not allow, over every module in the
    folders of `package_dir` (a `widgets/` tree)."""
    bad = {}
    for path in sorted(package_dir.glob("*/**/*.py")):
        role, lesson = role_of(path, package_dir)
        package = _module_name(path.parent / "__init__.py", package_dir)
        hits = [f"{line}: {name}" for line, name in imported_names(path.read_text(), package)
                if not allowed(role, name, lesson, package_dir)]
        if hits:
            bad[str(path.relative_to(package_dir.parent))] = hits
    return bad


# --- the table itself ---------------------------------------------------------------------------

def test_every_module_sits_in_a_layer_or_lesson_folder():
    loose = [p.name for p in PACKAGE_DIR.glob("*.py") if p.name != "__init__.py"]
    assert loose == [], f"modules at the top of widgets/ belong in a layer folder: {loose}"
    folders = {p.parent.name for p in PACKAGE_DIR.glob("*/__init__.py")}
    assert folders == set(SHARED) | {"lessons"}, "every shared folder of widgets/ has a row in LAYERS, and every row a folder"
    lessons = PACKAGE_DIR / "lessons"
    assert not list(lessons.glob("*/*/*.py")), "a lesson's folder is flat: one file per role or compute module"
    assert all((d / "__init__.py").exists() for d in lessons.iterdir() if d.is_dir() and d.name != "__pycache__")


def test_the_table_names_real_layers_and_modules():
    for role, row in LAYERS.items():
        for entry in (e for e in row if e.startswith("widgets.")):
            parts = entry.split(".")
            assert parts[1] in SHARED and parts[1] != role, f"{role}: {entry} is not another shared layer"
            assert (ROOT / Path(*parts)).with_suffix(".py").exists() or (ROOT / Path(*parts) / "__init__.py").exists(), entry
        for entry in (e for e in row if e.startswith("lesson ")):
            assert role.startswith("lesson ") and entry in LAYERS and entry != role, f"{role}: {entry}"


def test_the_table_has_no_cycle():
    below = {role: {e.split(".")[1] for e in row if e.startswith("widgets.")} | {e for e in row if e.startswith("lesson ")}
             for role, row in LAYERS.items()}
    done: list[str] = []
    while len(done) < len(below):
        ready = [role for role in below if role not in done and below[role] <= set(done)]
        assert ready, f"these roles import each other: {sorted(set(below) - set(done))}"
        done += ready


def test_the_table_keeps_the_project_rules():
    """Only controls build widgets; only drawings and controls draw; controls may use everything below."""
    assert [role for role, row in LAYERS.items() if "ipywidgets" in row] == ["controls", "lesson controls"]
    assert [role for role, row in LAYERS.items() if "matplotlib" in row] == ["draw", "controls", "lesson draw",
                                                                               "lesson controls"]
    assert {f"widgets.{layer}" for layer in SHARED} - {"widgets.controls"} <= set(LAYERS["controls"])
    assert {f"widgets.{layer}" for layer in SHARED} <= set(LAYERS["lesson controls"])
    assert "torch" not in reach("lab"), "the doctor must run where torch is broken"
    assert not reach("lesson compute") - {"torch"}, "a lesson's compute imports neither matplotlib nor ipywidgets"
    assert "ipywidgets" not in reach("lesson draw"), "a lesson's drawing imports no ipywidgets"


# --- the rule, on made-up imports -----------------------------------------------------------------

@pytest.mark.parametrize("name", ["widgets.audit", "widgets.audit.auditor", "widgets.exercises.toolkit",
                                  "widgets.draw.frames", "widgets.controls", "widgets.lab.presets", "widgets",
                                  "widgets.make_accumulation_explorer", "matplotlib.pyplot", "ipywidgets", "numpy",
                                  "widgets.lessons.beginner_1.bricks", "widgets.lessons.beginner_1"])
def test_core_may_not_import(name):
    assert not allowed("core", name)


@pytest.mark.parametrize("layer, name", [("core", "torch.nn"), ("core", "widgets.core.config"), ("core", "os.path"),
                                         ("lab", "widgets.core.config"), ("research", "widgets.core.loop"),
                                         ("exercises", "widgets.audit.auditor"), ("controls", "widgets.draw.frames")])
def test_what_the_rows_allow(layer, name):
    assert allowed(layer, name)


@pytest.mark.parametrize("role, name, ok", [
    ("lesson compute", "widgets.lessons.researcher_7.pipeline", True),  # the same lesson's compute
    ("lesson compute", "widgets.lessons.researcher_7.draw", False),  # compute never draws
    ("lesson compute", "matplotlib", False),
    ("lesson compute", "widgets.lessons.researcher_6.invariance", False),  # another lesson
    ("lesson draw", "widgets.lessons.researcher_7.pipeline", True),
    ("lesson draw", "widgets.lessons.researcher_7.controls", False),
    ("lesson draw", "ipywidgets", False),
    ("lesson exercises", "widgets.lessons.researcher_7.draw", False),
    ("lesson controls", "widgets.lessons.researcher_7.draw", True),
    ("lesson controls", "widgets.controls.prediction", True),
])
def test_a_lessons_roles(role, name, ok):
    assert allowed(role, name, "researcher_7") is ok


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


def test_a_lesson_that_draws_in_its_compute_or_reaches_another_lesson_is_caught(tmp_path):
    """A made-up lesson: compute importing matplotlib or its own draw.py, draw importing ipywidgets,
    and an import of another lesson are each reported; its surface may name any module."""
    widgets_dir = tmp_path / "widgets"
    lesson = widgets_dir / "lessons" / "alpha"
    lesson.mkdir(parents=True)
    (widgets_dir / "lessons" / "beta").mkdir()
    for path in (widgets_dir / "__init__.py", widgets_dir / "lessons" / "__init__.py", widgets_dir / "lessons" / "beta" / "__init__.py"):
        path.write_text("")
    (widgets_dir / "lessons" / "beta" / "maths.py").write_text("import torch\n")
    (lesson / "__init__.py").write_text("from widgets.core.surface import lazy_surface\n"
                                        "_NAMES = {'run': 'widgets.lessons.alpha.maths', 'bricks': 'widgets.lessons.beta.maths'}\n")
    (lesson / "maths.py").write_text("import torch\nimport matplotlib.pyplot\nfrom widgets.lessons.alpha.draw import plot\n"
                                     "from widgets.lessons.beta.maths import x\n")
    (lesson / "draw.py").write_text("import matplotlib\nimport ipywidgets\nfrom widgets.lessons.alpha.maths import run\n")
    (lesson / "controls.py").write_text("import ipywidgets\nfrom widgets.lessons.alpha.draw import plot\n")
    assert layer_violations(widgets_dir) == {
        "widgets/lessons/alpha/draw.py": ["2: ipywidgets"],
        "widgets/lessons/alpha/maths.py": ["2: matplotlib.pyplot", "3: widgets.lessons.alpha.draw",
                                           "4: widgets.lessons.beta.maths"]}


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


def _modules_by_role() -> dict[str, list[str]]:
    """role -> the dotted names of its modules (a lesson's surfaces under 'lesson surface')."""
    found: dict[str, list[str]] = {}
    for path in sorted(PACKAGE_DIR.glob("*/**/*.py")):
        found.setdefault(role_of(path)[0], []).append(_module_name(path, PACKAGE_DIR))
    return found


@pytest.fixture(scope="module")
def brought_in() -> dict[str, list[str]]:
    """module -> the GUARDED packages that first appeared when it was imported (probe_order; the
    surfaces first of all: they must bring in nothing)."""
    by_role = _modules_by_role()
    names = ["widgets", *by_role.get("lessons", []),
             *(name for role in probe_order() for name in by_role.get(role, []))]
    result = subprocess.run([sys.executable, "-c", _PROBE, json.dumps(names), json.dumps(GUARDED)],
                            capture_output=True, text=True, check=True)
    return json.loads(result.stdout)


def test_the_probe_order_is_sound():
    """Each role may bring in everything the roles imported before it may: else a package an
    earlier role brought in would hide a later role's forbidden import of it."""
    order = probe_order()
    assert all(reach(a) <= reach(b) for a, b in zip(order, order[1:])), [(role, reach(role)) for role in order]


def test_import_widgets_and_the_lesson_surfaces_is_light(brought_in):
    by_role = _modules_by_role()
    assert {name: brought_in[name] for name in ["widgets", *by_role["lessons"]] if brought_in[name]} == {}


@pytest.mark.parametrize("role", LAYERS)
def test_importing_a_role_brings_in_only_what_its_row_allows(role, brought_in):
    """The computation roles (core, research, audit, exercises, lab, a lesson's compute and exercises)
    leave matplotlib and ipywidgets out of sys.modules; lab leaves torch out too."""
    if role.startswith("lesson "):
        pytest.skip("importing a lesson module runs its package's __init__.py, which imports the notebook's names")
    bad = {name: sorted(set(brought_in[name]) - reach(role)) for name in _modules_by_role().get(role, [])}
    bad = {name: found for name, found in bad.items() if found}
    assert bad == {}, f"{role} may bring in only {sorted(reach(role))} at import; these brought in more: {bad}"


def test_package_exposes_the_public_names_lazily():
    for name in widgets.__all__:
        assert callable(getattr(widgets, name)), name
    with pytest.raises(AttributeError, match="no_such_name"):
        widgets.no_such_name  # noqa: B018


# --- the quotes ----------------------------------------------------------------------------------

def _label(role: str) -> str:
    """`core/` for a shared folder, `lesson draw` for a lesson's role."""
    return role if role.startswith("lesson ") else role + "/"


def quoted_row(layer: str) -> str:
    """A row as the docstrings quote it: `core/             torch`, layers without the `widgets.` prefix."""
    return f"{_label(layer):<18}" + ", ".join(entry.removeprefix("widgets.") for entry in LAYERS[layer])


def test_widgets_docstring_quotes_the_table():
    block = "\n".join("    " + quoted_row(layer) for layer in LAYERS)
    assert block in widgets.__doc__, f"widgets/__init__.py's docstring should quote the table:\n{block}"


def test_lab_docstring_quotes_its_row():
    import widgets.lab

    assert quoted_row("lab") in widgets.lab.__doc__, f"widgets/lab/__init__.py should quote: {quoted_row('lab')}"


def test_readme_quotes_the_table():
    rows = dict(re.findall(r"^\| `(\w+/|lesson \w+)` \|.*\| ([^|]*) \|$", (ROOT / "README.md").read_text(), re.MULTILINE))
    expected = {_label(layer): ", ".join(f"`{entry.removeprefix('widgets.')}`" for entry in row)
                for layer, row in LAYERS.items()}
    assert rows == expected, "the README's layer table, last column, should quote LAYERS"
