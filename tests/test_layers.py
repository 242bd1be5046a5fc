"""The compute layer must stay free of drawing and widget libraries (checked in a fresh interpreter)."""
import subprocess
import sys

import pytest

COMPUTE_MODULES = [
    "widgets",
    "widgets.config",
    "widgets.accumulation",
    "widgets.training",
    "widgets.auditor",
    "widgets.auditor_instruments",
    "widgets.exercises_proof",
    "widgets.exercises_loop",
    "widgets.exercises_gallery",
    "widgets.developer_exercises",
    "widgets.bricks",
    "widgets.catalog",
]


@pytest.mark.parametrize("module", COMPUTE_MODULES)
def test_compute_module_imports_no_matplotlib_or_ipywidgets(module):
    code = (
        f"import sys, {module}\n"
        "leaked = sorted(m for m in ('matplotlib', 'ipywidgets') if m in sys.modules)\n"
        "print(','.join(leaked))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "", f"{module} imported {result.stdout.strip()}"


def test_package_exposes_the_explorer_lazily():
    import widgets

    assert callable(widgets.make_accumulation_explorer) and callable(widgets.make_bricks_widget)
    with pytest.raises(AttributeError, match="no_such_name"):
        widgets.no_such_name  # noqa: B018
