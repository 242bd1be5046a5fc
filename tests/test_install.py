"""The two installs: exact pins inside pyproject's tested ranges; learners get nothing of the tests'."""
from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from importlib import metadata
from pathlib import Path

import nbformat
import pytest

from widgets.core.measured import PACKAGED_RESULTS

ROOT = Path(__file__).resolve().parents[1]


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


def test_learners_get_no_test_tool():
    assert not set(TEST) & set(LEARNER), set(TEST) & set(LEARNER)


def declared() -> dict[str, tuple[str, str]]:
    """name -> (oldest, newest) of each range pyproject.toml declares."""
    tomllib = pytest.importorskip("tomllib")
    ranges = {}
    for requirement in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]:
        match = re.fullmatch(r"([A-Za-z0-9_.\-]+)>=(\S+),<=(\S+)", requirement)
        assert match, f"{requirement}: declare the tested range, oldest and newest: name>=OLDEST,<=NEWEST"
        ranges[norm(match[1])] = (match[2], match[3])
    return ranges


def test_pyproject_declares_ranges_that_admit_the_pins():
    """`make lab`, nbval and CI install requirements.txt's exact pins: each lies inside pyproject's range."""
    from packaging.version import Version

    for name, (oldest, newest) in declared().items():
        pin = LEARNER.get(name)
        assert pin, f"{name} is declared in pyproject.toml but not pinned in requirements.txt"
        assert Version(oldest) <= Version(pin) <= Version(newest), f"{name}=={pin} is outside {oldest} to {newest}"


def test_the_readme_states_the_tested_range_pyproject_admits():
    """The README's "Tested range" names every declared package with its oldest and newest end, and no other."""
    text = " ".join((ROOT / "README.md").read_text().split())
    line = re.search(r"\*\*Tested range\*\* \([^)]*\): ([^.]*(?:\.\d[^.]*)*)\.(?:\s|$)", text)
    assert line, "README.md: no '**Tested range** (...): name OLDEST to NEWEST, ...' sentence"
    stated = {norm(name): (oldest, newest) for name, oldest, newest in
              re.findall(r"([A-Za-z][\w\-]*) (\d[\w.]*) to (\d[\w.]*)", line[1])}
    assert stated == declared()


def test_the_oldest_end_of_each_range_is_the_colab_like_profile():
    """The oldest version declared is the one `make compat` installs in its Colab-like profile."""
    colab, _ = requirements(ROOT / "requirements-colab.txt")
    for name, (oldest, _) in declared().items():
        assert colab.get(name) == oldest, f"{name}: pyproject's oldest {oldest}, requirements-colab.txt {colab.get(name)}"


def test_the_newest_end_of_each_range_is_the_newest_profile_measured():
    """The newest version declared is the one `make compat`'s newest profile ran with (compat.json)."""
    results = ROOT / "benchmarks" / "results" / "compat.json"
    if not results.exists():
        pytest.skip("no benchmarks/results/compat.json yet: run `make compat`")
    ran = json.loads(results.read_text())["profiles"]["newest"]["versions"]
    for name, (_, newest) in declared().items():
        assert ran.get(name) == newest, f"{name}: pyproject's newest {newest}, the newest profile ran {ran.get(name)}"


def test_requirements_colab_pins_every_package_exactly():
    pins, other = requirements(ROOT / "requirements-colab.txt")
    assert other == [] and {"torch", "ipywidgets", "widgetsnbextension", "notebook", "nbval"} <= set(pins)
    assert pins["ipywidgets"] == "7.7.1" and pins["widgetsnbextension"].startswith("3.6.")
    assert pins["notebook"].startswith("6.5.")


def test_binder_installs_learner_pins_only():
    binder, _ = requirements(ROOT / "binder" / "requirements.txt")
    assert not set(TEST) & set(binder)
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


@pytest.mark.slow
def test_a_wheel_carries_the_measured_results_for_a_lab_without_its_checkout(tmp_path):
    """pip installs the lab without the checkout (the install cell on Colab): its wheel carries
    benchmarks/results.json, which start-here's map reads there, and the measurements a
    notebook reads (core.measured.results_path: researcher_4's planner_peak.json)."""
    source = tmp_path / "source"
    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                           capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, files):
        if (ROOT / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, source / name)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path / "dist"), str(source)],
                   check=True, capture_output=True, timeout=600)
    (wheel,) = (tmp_path / "dist").glob("gradient_accumulation_lab-*.whl")
    site = tmp_path / "site"
    with zipfile.ZipFile(wheel) as archive:
        assert archive.read("widgets/core/benchmark_results.json") == (ROOT / "benchmarks" / "results.json").read_bytes()
        for name in PACKAGED_RESULTS:
            assert archive.read(f"widgets/core/results/{name}") == (ROOT / "benchmarks" / "results" / name).read_bytes()
        archive.extractall(site)
    probe = ("import json, widgets; from widgets.lessons.start_here import catalog\n"
             "from widgets.core.measured import PACKAGED_RESULTS, results_path\n"
             "print(json.dumps([widgets.__file__, str(catalog.RESULTS_PATH), str(catalog.catalog_table()),"
             " [str(results_path(name)) for name in PACKAGED_RESULTS]]))")
    done = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True, check=True,
                          env={**os.environ, "PYTHONPATH": str(site)}, timeout=300)
    package, results_path, text, packaged = json.loads(done.stdout)
    assert package.startswith(str(site)) and results_path == str(site / "widgets" / "core" / "benchmark_results.json")
    assert packaged == [str(site / "widgets" / "core" / "results" / name) for name in PACKAGED_RESULTS]
    measured = json.loads((ROOT / "benchmarks" / "results.json").read_text())
    seconds = measured["notebooks"]["notebooks/00_start_here.ipynb"]["seconds"]
    assert "(00_start_here.ipynb) | the idea" in text and f"| {seconds:.1f} s |" in text and "not measured yet" not in text


def test_results_path_reads_the_checkout_here_and_names_only_what_a_wheel_carries():
    from widgets.core.measured import results_path

    assert results_path("planner_peak.json") == ROOT / "benchmarks" / "results" / "planner_peak.json"
    with pytest.raises(ValueError, match="name must be one of"):
        results_path("../results.json")
