"""The two installs: learners get what the notebooks import and nothing of the tests'; pins are
exact; what pyproject declares is what is tested; `make lab` installs the learner file only."""
from __future__ import annotations

import ast
import re
import sys
from importlib import metadata
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
TEST_TOOLS = {"pytest", "nbval", "playwright", "psutil", "jupyter-repo2docker", "ruff"}


def norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def requirements(path: Path) -> tuple[dict[str, str], list[str]]:
    """(name -> pinned version, the other lines) of a requirements file."""
    pins, other = {}, []
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        match = re.fullmatch(r"([A-Za-z0-9_.\-]+)==(\S+)", line)
        if match:
            pins[norm(match[1])] = match[2]
        else:
            other.append(line)
    return pins, other


LEARNER, LEARNER_OTHER = requirements(ROOT / "requirements.txt")
TEST, TEST_OTHER = requirements(ROOT / "requirements-test.txt")


def test_every_requirement_is_an_exact_pin():
    assert LEARNER_OTHER == ["-e ."], LEARNER_OTHER
    assert TEST_OTHER == ["-r requirements.txt"], TEST_OTHER


def test_learners_get_no_test_tool_and_the_tests_get_all_of_them():
    assert not TEST_TOOLS & set(LEARNER), TEST_TOOLS & set(LEARNER)
    assert set(TEST) == TEST_TOOLS


def test_pyproject_declares_the_tested_versions():
    tomllib = pytest.importorskip("tomllib")
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    for requirement in declared:
        match = re.fullmatch(r"([A-Za-z0-9_.\-]+)==(\S+)", requirement)
        assert match, f"{requirement}: declare the tested version exactly (see the comment in pyproject.toml)"
        assert LEARNER.get(norm(match[1])) == match[2], f"{requirement} is not the pin in requirements.txt"


def test_binder_installs_learner_pins_only():
    binder, _ = requirements(ROOT / "binder" / "requirements.txt")
    assert not TEST_TOOLS & set(binder)
    for name, version in binder.items():
        assert LEARNER.get(name, "").split("+")[0] == version.split("+")[0], name


def test_make_lab_installs_the_learner_file_and_make_test_adds_the_test_file():
    makefile = (ROOT / "Makefile").read_text()
    learner_rule = re.search(r"^\$\(VENV\)/\.installed:.*?touch \$@", makefile, re.M | re.S)[0]
    assert "-r requirements.txt" in learner_rule and "requirements-test" not in learner_rule
    assert re.search(r"^lab: install$", makefile, re.M) and re.search(r"^test: install-test$", makefile, re.M)
    assert "--quiet" not in makefile, "installs must show progress"


def imported_modules() -> set[str]:
    """Top-level modules imported by the notebooks' code cells, the package and the projector page."""
    sources = [p.read_text() for p in (ROOT / "widgets").rglob("*.py")]
    for path in [*sorted((ROOT / "notebooks").glob("*.ipynb")), ROOT / "present" / "explorer.ipynb"]:
        nb = nbformat.read(path, as_version=4)
        sources += ["\n".join(ln for ln in c.source.splitlines() if not ln.lstrip().startswith(("%", "!")))
                    for c in nb.cells if c.cell_type == "code"]
    found = set()
    for source in sources:
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Import):
                found |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found.add(node.module.split(".")[0])
    return found - set(sys.stdlib_module_names) - {"widgets", "__future__"}


def closure(names: set[str]) -> set[str]:
    """The installed distributions `names` need, transitively (extras left out)."""
    seen, todo = set(), list(names)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        try:
            requires = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            continue
        todo += [norm(re.match(r"[A-Za-z0-9_.\-]+", r)[0]) for r in requires if "extra ==" not in r]
    return seen


def test_everything_a_notebook_imports_comes_with_the_learner_set():
    providers = {module: {norm(d) for d in dists} for module, dists in metadata.packages_distributions().items()}
    learner_closure = closure(set(LEARNER))
    missing = {m: sorted(providers.get(m, {"(not installed)"})) for m in imported_modules()
               if not providers.get(m, set()) & learner_closure}
    assert missing == {}, f"imported but not installed by requirements.txt: {missing}"
