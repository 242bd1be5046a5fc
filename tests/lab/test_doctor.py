"""The doctor finds each simulated problem, says how to fix it, and says "all good" otherwise.

Two kinds of simulation: `Facts` edited by hand (every check, fast), and real broken
environments run as a subprocess: a kernel from another virtual environment, and a kernel whose
ipywidgets is of the wrong generation for the page's widget extension.
"""
import dataclasses
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import widgets
from widgets.lab import doctor as doc

ROOT = Path(__file__).resolve().parents[2]
PINS = {"ipywidgets": "8.1.9", "jupyterlab_widgets": "3.0.17", "torch": "2.13.0", "matplotlib": "3.11.2"}


def healthy(**changes) -> doc.Facts:
    facts = doc.Facts(
        kernel_prefix="/lab/.venv", kernel_python="/lab/.venv/bin/python", lab_prefix="/lab/.venv",
        server_prefix="/lab/.venv", versions={**{n: "1.0" for n in doc.NEEDED}, **PINS, "torch": "2.13.0+cpu"},
        pins=PINS, extension={"version": "5.0.16", "disabled": False, "jupyterlab_widgets": "3.0.17"},
        torch={"version": "2.13.0+cpu", "cuda": None, "threads": 2, "error": None}, usable_cpus=2, backend=None,
        available_mb=4000, need_mb=500,
    )
    return dataclasses.replace(facts, **changes)


def problems(facts: doc.Facts) -> dict[str, str]:
    return {f.check: f"{f.problem} | fix: {f.fix}" for f in doc.diagnose(facts) if not f.ok}


def test_a_healthy_environment_is_all_good_in_one_stable_line():
    report = doc.Report(doc.diagnose(healthy()))
    assert report.ok
    assert repr(report) == ("widgets.doctor: all good (python, packages, widget extension, torch, "
                            "matplotlib backend, memory checked)")


@pytest.mark.parametrize("changes, check, says", [
    ({"kernel_prefix": "/opt/conda", "kernel_python": "/opt/conda/bin/python", "server_prefix": None},
     "python", "not the lab's Python.*fix: start JupyterLab with `make lab`"),
    ({"server_prefix": "/usr"}, "python", "JupyterLab runs from /usr.*two environments"),
    ({"versions": {**PINS, "torch": "2.13.0"}}, "packages", "not installed.*ipykernel.*tqdm.*pip install -r requirements.txt"),
    ({"versions": {**{n: "1.0" for n in doc.NEEDED}, **PINS, "matplotlib": "3.9.0"}}, "packages",
     r"matplotlib 3.9.0 \(pinned 3.11.2\)"),
    ({"versions": {**{n: "1.0" for n in doc.NEEDED}, **PINS, "ipywidgets": "7.8.5"}}, "widget extension",
     r"ipywidgets 7.8.5, which needs the widget extension 3.x \(jupyterlab_widgets 1.x\), but the page has 5.0.16"),
    ({"extension": {"version": "3.1.0", "jupyterlab_widgets": "1.1.7", "disabled": False}}, "widget extension",
     "ipywidgets 8.1.9, which needs the widget extension 5.x.*page has 3.1.0.*pip install ipywidgets==8.1.9 jupyterlab_widgets==3.0.17"),
    ({"extension": {"version": None, "disabled": False}}, "widget extension", "not installed where JupyterLab runs"),
    ({"extension": {"version": "5.0.16", "disabled": True}}, "widget extension", "disabled.*labextension enable"),
    ({"torch": {"error": "ModuleNotFoundError: No module named 'torch'"}}, "torch", "does not import.*TORCH=cpu"),
    ({"torch": {"threads": 16, "error": None}, "usable_cpus": 2}, "torch", r"16 threads on 2.*set_num_threads\(2\)"),
    ({"backend": "TkAgg"}, "matplotlib backend", "'TkAgg'.*unset MPLBACKEND"),
    ({"available_mb": 300}, "memory", "300 MB free.*near 500 MB"),
])
def test_each_simulated_problem_is_found_with_its_fix(changes, check, says):
    found = problems(healthy(**changes))
    assert check in found, found
    assert pytest.importorskip("re").search(says, found[check]), found[check]
    report = repr(doc.Report(doc.diagnose(healthy(**changes))))
    assert report.startswith("widgets.doctor found") and "fix:" in report


def test_no_lab_venv_and_a_notebook_backend_are_fine():
    """On Binder there is no .venv; `%matplotlib inline` and the explorer's Agg are notebook backends."""
    for backend in ("module://matplotlib_inline.backend_inline", "agg", None):
        assert problems(healthy(lab_prefix=None, server_prefix=None, backend=backend)) == {}


def test_extension_facts_read_the_folders_jupyterlab_reads(tmp_path):
    data, config = tmp_path / "share", tmp_path / "etc"
    assert doc.extension_facts([str(data)], [str(config)])["version"] is None
    package = data / "@jupyter-widgets" / "jupyterlab-manager" / "package.json"
    package.parent.mkdir(parents=True)
    package.write_text(json.dumps({"name": doc.EXTENSION, "version": "5.0.16"}))
    facts = doc.extension_facts([str(data)], [str(config)])
    assert facts["version"] == "5.0.16" and not facts["disabled"]
    (config / "labconfig").mkdir(parents=True)
    for disabled in ({doc.EXTENSION: True}, [doc.EXTENSION]):  # JupyterLab 4's form, and the older list
        (config / "labconfig" / "page_config.json").write_text(json.dumps({"disabledExtensions": disabled}))
        assert doc.extension_facts([str(data)], [str(config)])["disabled"]


@pytest.mark.parametrize("content, says", [
    ("{not json", "is not valid JSON"), ("[1, 2]", "holds a JSON list, not an object"),
    ('{"disabledExtensions": 5}', "disabledExtensions is a int"), ("", "is not valid JSON"),
])
def test_a_malformed_page_config_is_named_not_a_crash(tmp_path, content, says):
    """Read in the kernel or the probe alike: the finding names the file, and does not say "not installed"."""
    data, config = tmp_path / "share", tmp_path / "etc"
    package = data / "@jupyter-widgets" / "jupyterlab-manager" / "package.json"
    package.parent.mkdir(parents=True)
    package.write_text(json.dumps({"name": doc.EXTENSION, "version": "5.0.16"}))
    (config / "labconfig").mkdir(parents=True)
    (config / "labconfig" / "page_config.json").write_text(content)
    facts = doc.extension_facts([str(data)], [str(config)])
    found = problems(healthy(extension=facts))
    assert list(found) == ["widget extension"], found
    assert "page_config.json" in found["widget extension"] and says in found["widget extension"]
    assert "not installed" not in found["widget extension"]
    package.write_text("{")  # the extension's own package.json, cut short
    assert "package.json is not valid JSON" in problems(healthy(extension=doc.extension_facts([str(data)], [])))[
        "widget extension"]


def test_a_probe_that_fails_is_not_called_not_installed(tmp_path):
    broken = tmp_path / "python"
    broken.write_text("#!/bin/sh\necho 'Fatal Python error: init_fs_encoding' >&2\nexit 1\n")
    broken.chmod(0o755)
    prefix, extension = doc._probe(str(broken))
    found = problems(healthy(extension=extension))["widget extension"]
    assert prefix is None and "could not be checked" in found and "init_fs_encoding" in found
    assert "not installed" not in found


@pytest.mark.skipif(not (ROOT / ".venv" / "pyvenv.cfg").exists(), reason="needs the lab's .venv (make install)")
def test_the_doctor_from_a_shell_names_a_malformed_page_config(tmp_path):
    """`make doctor` with a broken labconfig/page_config.json: a finding, exit status 1, no traceback."""
    (tmp_path / "labconfig").mkdir()
    (tmp_path / "labconfig" / "page_config.json").write_text('{"disabledExtensions": {"x": true,}}')
    env = {**os.environ, "JUPYTER_CONFIG_DIR": str(tmp_path)}
    result = subprocess.run([str(ROOT / ".venv" / "bin" / "python"), "-m", "widgets.lab.doctor"], capture_output=True,
                            text=True, cwd=tmp_path, env=env, timeout=300)
    assert "Traceback" not in result.stderr, result.stderr
    assert result.returncode == 1
    assert f"[widget extension] JupyterLab's extension settings cannot be read: {tmp_path}/labconfig/page_config.json" \
        in result.stdout, result.stdout


def test_the_server_python_is_read_from_the_parent_process():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)  # a jupyter-lab stand-in"])
    try:
        cmdline = Path(f"/proc/{child.pid}/cmdline")
        for _ in range(100):  # until the child has exec'd (before that /proc shows pytest's own command)
            if b"jupyter-lab" in cmdline.read_bytes():
                break
            time.sleep(0.05)
        assert doc.server_python(child.pid) == sys.executable
    finally:
        child.kill()
        child.wait()
    assert doc.server_python(1 if Path("/proc/1/cmdline").exists() else 10**9) in (None, doc.server_python(1))


def test_the_package_exposes_doctor_lazily():
    assert widgets.doctor is doc.doctor


def run_doctor(python: str, tmp_path: Path, pythonpath: list[Path]) -> subprocess.CompletedProcess:
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": ":".join(map(str, pythonpath))}
    return subprocess.run([python, "-m", "widgets.lab.doctor"], capture_output=True, text=True, cwd=tmp_path,
                          env=env, timeout=300)


@pytest.mark.skipif(not (ROOT / ".venv" / "pyvenv.cfg").exists(), reason="needs the lab's .venv (make install)")
def test_a_kernel_from_another_environment_is_found(tmp_path):
    """A bare virtual environment that can import `widgets` (PYTHONPATH) and nothing else."""
    other = tmp_path / "other"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(other)], check=True)
    result = run_doctor(str(other / "bin" / "python"), tmp_path, [ROOT])
    assert result.returncode == 1, result.stdout + result.stderr
    assert f"this kernel runs {other}/bin/python, not the lab's Python" in result.stdout
    assert "not installed in this kernel's environment: ipywidgets" in result.stdout
    assert "[torch] torch does not import" in result.stdout


@pytest.mark.skipif(not (ROOT / ".venv" / "pyvenv.cfg").exists(), reason="needs the lab's .venv (make install)")
def test_an_ipywidgets_of_the_wrong_generation_is_found(tmp_path):
    """The lab's Python, with a fake ipywidgets 7 found first: the page's extension is of generation 8."""
    site = tmp_path / "site"
    meta = site / "ipywidgets-7.8.5.dist-info"
    meta.mkdir(parents=True)
    (meta / "METADATA").write_text("Metadata-Version: 2.1\nName: ipywidgets\nVersion: 7.8.5\n")
    result = run_doctor(str(ROOT / ".venv" / "bin" / "python"), tmp_path, [site])
    assert result.returncode == 1, result.stdout + result.stderr
    assert "[widget extension] the kernel has ipywidgets 7.8.5, which needs the widget extension 3.x" in result.stdout
    assert "[python]" not in result.stdout
