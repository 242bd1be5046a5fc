"""tools/setup_lab.py and tools/run_tests.py run the Makefile's commands, without make."""
from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path, PureWindowsPath

import pytest

ROOT = Path(__file__).resolve().parents[1]
needs_make = pytest.mark.skipif(shutil.which("make") is None, reason="compares with make's own dry run")


def commands(text: str) -> list[list[str]]:
    """The programs a dry run starts, as argv lists: make's shell-only lines (echo, touch, the `test -x`
    guard before a venv) and the script's progress lines left out."""
    found = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith(("echo ", "touch ", "---")):
            continue
        if "||" in line:  # `test -x PY || python -m venv` runs the right side; `pip ... || { echo; exit 1; }` the left
            line = line.split("||")[1 if line.startswith("test -x") else 0]
        found.append(shlex.split(line))
    return found


def dry_run(script: str, *args: str) -> list[list[str]]:
    done = subprocess.run([sys.executable, f"tools/{script}", "--dry-run", *args], cwd=ROOT, capture_output=True,
                          text=True, check=True)
    return commands(done.stdout)


def make_dry_run(*args: str) -> list[list[str]]:
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}  # under make test
    done = subprocess.run(["make", "-n", "--no-print-directory", *args, f"VENV={ROOT / '.venv'}",
                           f"PYTHON={sys.executable}"], cwd=ROOT, capture_output=True, text=True, check=True, env=env)
    return commands(done.stdout)


@needs_make
@pytest.mark.parametrize("script_args, make_args", [
    ((), ()), (("--torch", "cpu"), ("TORCH=cpu",)), (("--wheels", "wheelhouse"), ("WHEELS=wheelhouse",)),
])
def test_setting_up_runs_what_make_lab_runs(script_args, make_args):
    assert dry_run("setup_lab.py", *script_args) == make_dry_run("-B", "lab", *make_args)


@needs_make
@pytest.mark.parametrize("script_args, target", [((), "test"), (("--check",), "check")])
def test_the_tests_run_what_make_test_runs(script_args, target):
    assert dry_run("run_tests.py", *script_args) == make_dry_run("-o", "install-test", target)


def test_each_system_has_its_venv_layout():
    spec = __import__("importlib.util").util.spec_from_file_location("setup_lab", ROOT / "tools" / "setup_lab.py")
    setup_lab = __import__("importlib.util").util.module_from_spec(spec)
    spec.loader.exec_module(setup_lab)
    windows = setup_lab.venv_bin(PureWindowsPath(r"C:\Users\ada\lab\.venv"), "python", windows=True)
    assert str(windows) == r"C:\Users\ada\lab\.venv\Scripts\python.exe"
    assert setup_lab.venv_bin(PureWindowsPath(r"C:\lab\.venv"), "ruff", windows=True).name == "ruff.exe"
    assert setup_lab.venv_bin(Path("/lab/.venv"), "python", windows=False) == Path("/lab/.venv/bin/python")


STAND_IN_LAB = 'import sys\nprint("lab.py started by", sys.executable, sys.argv[1:])\n'


@pytest.fixture
def small_copy(tmp_path):
    """A checkout shaped like this one, with tiny requirement files, a stand-in tools/lab.py and stand-in tests."""
    for name in ("setup_lab.py", "run_tests.py", "install_notice.py"):
        (tmp_path / "tools").mkdir(exist_ok=True)
        shutil.copy2(ROOT / "tools" / name, tmp_path / "tools" / name)
    (tmp_path / "tools" / "lab.py").write_text(STAND_IN_LAB)
    (tmp_path / "requirements.txt").write_text("tqdm==4.70.1\n")
    pins = {line.split("==")[0]: line for line in (ROOT / "requirements-test.txt").read_text().splitlines()}
    tools = "".join(pins[name] + "\n" for name in ("pytest", "pytest-xdist", "ruff", "import-linter"))
    (tmp_path / "requirements-test.txt").write_text(f"-r requirements.txt\n{tools}")
    ruff = (ROOT / "pyproject.toml").read_text().split("[tool.ruff]")[1].split("[tool.importlinter]")[0]
    (tmp_path / "pyproject.toml").write_text(
        '[tool.pytest.ini_options]\nmarkers = ["rounding: a stand-in", "notebook: a stand-in"]\n\n'
        f"[tool.ruff]{ruff}\n[tool.importlinter]\nroot_packages = [\"widgets\"]\ninclude_external_packages = true\n"
        '[[tool.importlinter.contracts]]\nname = "a stand-in"\ntype = "forbidden"\nsource_modules = ["widgets"]\n'
        'forbidden_modules = ["tqdm"]\n')
    for folder in ("widgets", "tests", "benchmarks", "instructor", "present", "hub", "site", "notebooks"):
        (tmp_path / folder).mkdir(exist_ok=True)
    (tmp_path / "widgets" / "__init__.py").write_text("")
    stand_in = {"name": "stand-in", "version": "1.0.0"}  # the site's npm packages: none here
    (tmp_path / "site" / "package.json").write_text(json.dumps({**stand_in, "private": True}))
    (tmp_path / "site" / "package-lock.json").write_text(json.dumps(
        {**stand_in, "lockfileVersion": 3, "requires": True, "packages": {"": stand_in}}))
    (tmp_path / "conftest.py").write_text("")
    (tmp_path / "tests" / "test_stand_in.py").write_text(textwrap.dedent("""\
        import pytest


        @pytest.mark.rounding
        def test_the_learner_set_is_installed():
            import tqdm  # noqa: F401
        """))
    (tmp_path / "notebooks" / "test_notebook_stand_in.py").write_text("def test_a_notebook():\n    pass\n")
    return tmp_path


def run(copy: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], cwd=copy, capture_output=True, text=True, timeout=900)


@pytest.mark.slow
def test_the_two_commands_set_up_start_and_test_without_make(small_copy):
    first = run(small_copy, "tools/setup_lab.py")
    assert first.returncode == 0, first.stdout + first.stderr
    python = small_copy / ".venv" / "bin" / "python"
    assert f"lab.py started by {python} [" in first.stdout
    assert "-m pip install --progress-bar on -r requirements.txt" in first.stdout
    again = run(small_copy, "tools/setup_lab.py", "--install-only")  # nothing changed: nothing installed again
    assert again.returncode == 0 and "pip install" not in again.stdout, again.stdout

    tests = run(small_copy, "tools/run_tests.py")
    assert tests.returncode == 0, tests.stdout + tests.stderr
    assert "-r requirements-test.txt" in tests.stdout
    assert ("npm ci" in tests.stdout) == (shutil.which("npm") is not None), tests.stdout  # the site's KaTeX, as make
    assert "+ ATEN_CPU_CAPABILITY=default MKL_ENABLE_INSTRUCTIONS=SSE4_2" in tests.stdout
    assert len(re.findall(r"\d+ passed", tests.stdout)) == 2, tests.stdout  # all; notebooks and rounding again

    (small_copy / "tests" / "test_broken.py").write_text("def test_broken():\n    assert False\n")
    broken = run(small_copy, "tools/run_tests.py")
    assert broken.returncode == 1, broken.stdout
    assert "ATEN_CPU_CAPABILITY" not in broken.stdout  # stopped at the first failing step, as make does
