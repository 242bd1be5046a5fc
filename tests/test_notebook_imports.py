"""A notebook imports the package only from its lesson (`widgets.lessons.<lesson>`) and from `widgets`."""
import ast
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def lesson_of(notebook: Path) -> str:
    """00_start_here -> start_here, researcher_7_shards_and_stages -> researcher_7."""
    stem = notebook.stem
    return "start_here" if stem.startswith("00_start_here") else "_".join(stem.split("_")[:2])


def widgets_imports(notebook: Path) -> dict[str, set[str]]:
    """module -> the names taken from it, over every code cell (IPython magics and shell lines skipped) but the
    install cell, which runs before the lab is installed, on Colab and Kaggle only (tests/test_install_cell.py)."""
    found: dict[str, set[str]] = {}
    for cell in nbformat.read(notebook, as_version=4).cells:
        if cell.cell_type != "code" or "lab-install" in cell.metadata.get("tags", []):
            continue
        source = "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in cell.source.splitlines())
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "widgets":
                found.setdefault(node.module, set()).update(alias.name for alias in node.names)
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.split(".")[0] == "widgets":
                        found.setdefault(alias.name, set()).add("*")
    return found


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_a_notebook_imports_from_its_lesson_and_widgets_only(notebook):
    modules = set(widgets_imports(notebook))
    assert modules <= {"widgets", f"widgets.lessons.{lesson_of(notebook)}"}, sorted(modules)


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_name_a_notebook_imports_is_in_its_lesson(notebook):
    import importlib

    for module, names in widgets_imports(notebook).items():
        lesson = importlib.import_module(module)
        missing = [name for name in names if name != "*" and not hasattr(lesson, name)]
        assert missing == [], f"{module} lacks {missing}"


def test_every_lesson_folder_has_its_notebook():
    lessons = {p.name for p in (ROOT / "widgets" / "lessons").iterdir() if (p / "__init__.py").exists()}
    assert lessons == {lesson_of(nb) for nb in NOTEBOOKS}
