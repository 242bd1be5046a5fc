"""The Binder configuration, checked without Binder: the Dockerfile repo2docker would build.

`repo2docker --no-build` needs no Docker engine: it prints the Dockerfile it would build. The
slow half of the check (a fresh virtual environment from the same pins that imports `widgets`
and re-runs the notebooks) is `benchmarks/check_binder_env.py`; its last result is in
`benchmarks/results/binder_env.json`.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BINDER = ROOT / "binder"


def pins(path: Path) -> dict[str, str]:
    """`name==version` lines of a requirements file, names normalised (`_` and `-` alike)."""
    found = {}
    for line in path.read_text().splitlines():
        match = re.match(r"^\s*([A-Za-z0-9_.\-]+)\s*==\s*(\S+)", line)
        if match:
            found[match[1].lower().replace("_", "-")] = match[2]
    return found


@pytest.fixture(scope="module")
def dockerfile() -> str:
    repo2docker = Path(sys.executable).with_name("repo2docker")
    if not repo2docker.exists():
        pytest.skip("repo2docker is not installed (pip install jupyter-repo2docker)")
    # As on mybinder.org: a non-root user (uid 1000), so the Dockerfile is the one Binder builds.
    result = subprocess.run(
        [str(repo2docker), "--no-build", "--debug", "--user-id", "1000", "--user-name", "jovyan", str(ROOT)],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout + "\n# repo2docker log:\n" + result.stderr


def test_dockerfile_installs_the_binder_requirements_then_runs_postbuild(dockerfile):
    install = re.search(r'^RUN \S*/pip install .*-r "binder/requirements.txt"', dockerfile, re.M)
    post_build = re.search(r"^RUN \./binder/postBuild$", dockerfile, re.M)
    assert install and post_build, "the Dockerfile must pip-install binder/requirements.txt and run binder/postBuild"
    assert install.start() < post_build.start()
    # The repository (and so the package postBuild installs) is copied in between.
    copy = re.search(r"^COPY --chown=\S+ src/ \$\{REPO_DIR\}/$", dockerfile, re.M)
    assert copy and install.start() < copy.start() < post_build.start()


def test_dockerfile_ignores_the_root_requirements_and_uses_the_pinned_python(dockerfile):
    assert not re.search(r'-r "requirements.txt"', dockerfile), "with binder/ present the root requirements are ignored"
    python = (BINDER / "runtime.txt").read_text().strip().removeprefix("python-")
    assert f"Building conda environment for python={python}" in dockerfile


def test_binder_requirements_use_cpu_only_torch():
    text = (BINDER / "requirements.txt").read_text()
    assert re.search(r"^--(extra-)?index-url https://download\.pytorch\.org/whl/cpu\s*$", text, re.M)
    assert pins(BINDER / "requirements.txt")["torch"].endswith("+cpu")


def test_binder_pins_match_the_main_requirements():
    """The kernel on Binder must print what nbval saw here: same versions, torch up to `+cpu`."""
    binder, main = pins(BINDER / "requirements.txt"), pins(ROOT / "requirements.txt")
    for name, version in binder.items():
        assert name in main, f"{name} is pinned for Binder but not in requirements.txt"
        assert version.split("+")[0] == main[name].split("+")[0], f"{name}: Binder {version}, requirements.txt {main[name]}"
    for needed in ("torch", "matplotlib", "ipywidgets", "jupyterlab-widgets", "jupyterlab", "ipykernel"):
        assert needed in binder, f"binder/requirements.txt must pin {needed}"


def test_postbuild_installs_the_package_and_stops_on_error():
    script = BINDER / "postBuild"
    assert os.access(script, os.X_OK), "binder/postBuild must be executable"
    lines = [ln.strip() for ln in script.read_text().splitlines() if ln.strip() and not ln.startswith("#")]
    assert "set -e" in lines or "set -euo pipefail" in lines
    assert any(re.search(r"pip install .*-e \.$", ln) for ln in lines)


def test_binder_badge_opens_the_start_here_notebook_in_jupyterlab():
    readme = (ROOT / "README.md").read_text()
    badge = re.search(r"\(https://mybinder\.org/v2/gh/[^)\s]+\)", readme)
    assert badge, "README.md has no Binder badge"
    match = re.search(r"[?&]urlpath=lab/tree/([^)&\s]+)", badge[0])
    assert match, "the Binder badge must open JupyterLab (?urlpath=lab/tree/...)"
    target = ROOT / match[1]
    assert target.suffix == ".ipynb" and "start_here" in target.name, target
    assert target.exists(), f"the Binder badge points at {match[1]}, which does not exist"


def test_fresh_environment_check_was_recorded():
    """benchmarks/check_binder_env.py is too slow for the suite; its recorded result must pass."""
    result_path = ROOT / "benchmarks" / "results" / "binder_env.json"
    if not result_path.exists():
        pytest.skip("run `python benchmarks/check_binder_env.py` once to record the fresh-environment check")
    result = json.loads(result_path.read_text())
    assert result["passed"], result
    assert result["binder_requirements"] == (BINDER / "requirements.txt").read_text(), (
        "binder/requirements.txt changed since the check: re-run benchmarks/check_binder_env.py"
    )

