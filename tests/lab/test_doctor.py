"""The doctor finds each simulated problem, says how to fix it, and says "all good" otherwise.

Two kinds of simulation: `Facts` edited by hand (every check, fast), and real broken
environments run as a subprocess: a kernel from another virtual environment, and a kernel whose
ipywidgets is of the wrong generation for the page's widget extension.
"""
import dataclasses
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

import widgets
from widgets.lab import doctor as doc
from widgets.lab import hosts

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


# --- the host: named, with its own advice ------------------------------------------------------------

@pytest.mark.parametrize("environ, modules, argv, host", [
    ({"COLAB_RELEASE_TAG": "release-colab_20260801"}, {}, None, "Colab"),
    ({}, {"google.colab": object()}, None, "Colab"),  # a Colab kernel that lost the variable
    ({"KAGGLE_KERNEL_RUN_TYPE": "Interactive"}, {}, None, "Kaggle"),
    ({"VSCODE_PID": "4242"}, {}, None, "VS Code"),
    ({"VSCODE_CWD": "/home/ada"}, {}, None, "VS Code"),
    ({}, {}, ["/lab/.venv/bin/python", "-m", "jupyterlab", "notebooks/00_start_here.ipynb"], "JupyterLab"),
    ({}, {}, ["/usr/bin/python3", "/usr/local/bin/jupyter-lab", "--no-browser"], "JupyterLab"),
    ({}, {}, ["/opt/venv/bin/python", "/opt/venv/bin/jupyterhub-singleuser"], "JupyterLab"),
    ({}, {}, ["C:\\lab\\.venv\\Scripts\\python.exe", "C:\\lab\\.venv\\Scripts\\jupyter-lab.exe"], "JupyterLab"),
    ({}, {}, ["/usr/bin/python3", "/usr/local/bin/jupyter-notebook"], "Jupyter Notebook"),
    ({}, {}, ["/usr/bin/python3", "-m", "notebook"], "Jupyter Notebook"),
    ({}, {}, ["/lab/.venv/bin/python", "/lab/.venv/bin/voila", "present/explorer.ipynb"], "Voilà"),
    ({}, {}, ["/usr/bin/python3", "/usr/local/bin/jupyter-server"], "Jupyter"),
    # a JupyterLab started from VS Code's terminal inherits its variables: the server decides
    ({"VSCODE_PID": "4242"}, {}, ["/lab/.venv/bin/python", "-m", "jupyterlab"], "JupyterLab"),
    ({"COLAB_RELEASE_TAG": "x", "VSCODE_PID": "1"}, {}, ["python", "-m", "jupyterlab"], "Colab"),
    ({"PATH": "/usr/bin"}, {}, None, "Python"),
])
def test_the_host_is_read_from_the_environment_and_the_server(environ, modules, argv, host):
    assert hosts.detect(environ, modules, argv) == host


def test_colab_with_ipywidgets_8_needs_its_custom_widget_manager():
    facts = healthy(host="Colab", server_prefix=None, lab_prefix=None, pins={}, extension={},
                    versions={**{n: "1.0" for n in (*doc.NEEDED, *hosts.PURE)}, "ipywidgets": "8.1.9"})
    report = repr(doc.Report(doc.diagnose(facts), facts))
    assert report.startswith("widgets.doctor on Colab found 1 problem(s):"), report
    assert "[widget manager] this kernel has ipywidgets 8.1.9: Colab shows ipywidgets 8 only through" in report
    assert "fix: run `from google.colab import output; output.enable_custom_widget_manager()`" in report
    assert "widget extension" not in report and "JupyterLab" not in report


def test_colab_with_its_own_ipywidgets_7_is_all_good_and_says_why():
    facts = healthy(host="Colab", server_prefix=None, lab_prefix=None, pins={}, extension={},
                    versions={**{n: "1.0" for n in (*doc.NEEDED, *hosts.PURE)}, "ipywidgets": "7.7.1"})
    report = repr(doc.Report(doc.diagnose(facts), facts))
    assert report.splitlines()[0] == ("widgets.doctor on Colab: all good (python, packages, widget manager, torch, "
                                      "matplotlib backend, memory checked)")
    assert report.splitlines()[1].startswith("(Colab: Colab shows ipywidgets 7 (its own 7.7.1) as they are")


def test_kaggle_without_the_install_asks_for_the_first_cell_with_internet_on():
    versions = {**{n: "1.0" for n in doc.NEEDED}, "tqdm": "4.67.1", "accelerate": "1.9.0"}  # no Lightning
    facts = healthy(host="Kaggle", server_prefix=None, lab_prefix=None, pins={}, extension={}, versions=versions)
    found = problems(facts)
    assert list(found) == ["packages"], found
    assert "not installed in this kernel's environment: pytorch-lightning, lightning-utilities, torchmetrics" \
        in found["packages"]
    assert "run the notebook's first cell" in found["packages"] and "Internet on first: Settings > Internet" \
        in found["packages"]
    assert "Internet on (Settings > Internet" in repr(doc.Report(doc.diagnose(facts), facts)).splitlines()[1]


def test_vs_code_has_no_widget_extension_to_check_and_names_its_jupyter_extension():
    facts = healthy(host="VS Code", server_prefix=None, extension={})  # the lab's .venv as VS Code's kernel
    assert problems(facts) == {}
    report = repr(doc.Report(doc.diagnose(facts), facts)).splitlines()
    assert report[0].startswith("widgets.doctor on VS Code: all good (python, packages, widget manager,")
    assert "Jupyter extension (ms-toolsai.jupyter)" in report[1]
    # the same facts on JupyterLab: the missing extension is a problem there
    assert "not installed where JupyterLab runs" in problems(healthy(host="JupyterLab", extension={}))["widget extension"]


def test_jupyterlab_is_named_and_checked_as_before():
    facts = healthy(host="JupyterLab")
    assert repr(doc.Report(doc.diagnose(facts), facts)) == (
        "widgets.doctor on JupyterLab: all good (python, packages, widget extension, torch, matplotlib backend, "
        "memory checked)")


@pytest.mark.parametrize("version, spec, inside", [
    ("2.13.0+cpu", ">=2.11.0,<=2.14.1", True), ("2.11.0", ">=2.11.0,<=2.14.1", True),
    ("2.14.1", ">=2.11.0,<=2.14.1", True), ("2.15.0", ">=2.11.0,<=2.14.1", False),
    ("2.10.2", ">=2.11.0,<=2.14.1", False), ("7.7.1", ">=7.7.1,<=8.1.9", True), ("7.6.5", ">=7.7.1,<=8.1.9", False),
    ("8.1.10", ">=7.7.1,<=8.1.9", False), ("2.0", "==2.0.0", True), ("3.10.0", ">=3.9", True),
])
def test_a_version_is_read_against_a_declared_range(version, spec, inside):
    assert doc.in_range(version, spec) is inside


def test_outside_the_declared_range_is_a_finding_where_there_are_no_pins():
    facts = healthy(pins={}, declared={"torch": ">=2.11.0,<=2.14.1", "ipywidgets": ">=7.7.1,<=8.1.9"},
                    versions={**{n: "1.0" for n in doc.NEEDED}, "torch": "2.15.0", "ipywidgets": "8.1.9"})
    found = problems(facts)["packages"]
    assert "outside the versions the lab is tested with: torch 2.15.0 (tested: >=2.11.0,<=2.14.1)" in found
    assert "ipywidgets" not in found.split("| fix")[0]
    assert problems(healthy(declared={"torch": ">=2.11.0,<=2.14.1"})) == {}  # pins decide where there are pins


def test_the_installed_package_declares_the_ranges_the_doctor_reads():
    tomllib = pytest.importorskip("tomllib")
    dependencies = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    split = (re.fullmatch(r"([a-z]+)(\S+)", d) for d in dependencies)
    assert doc.declared() == {m[1]: m[2] for m in split}


@pytest.mark.skipif(not (ROOT / ".venv" / "pyvenv.cfg").exists(), reason="needs the lab's .venv (make install)")
def test_a_kernel_on_colab_names_colab_and_its_widget_manager(tmp_path):
    """The lab's own Python told it runs on Colab (the variable Colab sets): ipywidgets 8.1.9 needs the manager."""
    env = {"PATH": "/usr/bin:/bin", "COLAB_RELEASE_TAG": "release-colab-test"}
    result = subprocess.run([str(ROOT / ".venv" / "bin" / "python"), "-c", "import widgets; print(widgets.doctor())"],
                            capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300)
    assert result.stdout.startswith("widgets.doctor on Colab found"), result.stdout + result.stderr
    assert "enable_custom_widget_manager()" in result.stdout
    assert "widget extension" not in result.stdout and "[python]" not in result.stdout
    assert "[packages]" not in result.stdout  # the lab's own set has what the install cell would add


# --- classic Notebook 6: an nbextension, not JupyterLab's extension -------------------------------------

def classic(**extension) -> doc.Facts:
    """Notebook 6.5 with widgetsnbextension 3.6.1, a kernel with ipywidgets 7.7.1 (the release pair)."""
    facts = healthy(host="Jupyter Notebook", versions={**healthy().versions, "ipywidgets": "7.7.1"}, pins={},
                    declared={"ipywidgets": ">=7.7.1,<=8.1.9"})  # a lab installed with pip: the ranges, no pins
    page = {"version": "5.0.16", "jupyterlab_widgets": "3.0.16", "notebook": "6.5.7", "widgetsnbextension": "3.6.1",
            "nbextension_enabled": True}
    return dataclasses.replace(facts, extension={**page, **extension})


def test_classic_notebook_6_is_named_and_its_nbextension_checked():
    facts = classic()
    assert repr(doc.Report(doc.diagnose(facts), facts)).startswith("widgets.doctor on Jupyter Notebook: all good")


@pytest.mark.parametrize("extension, says", [
    ({"widgetsnbextension": None}, 'not installed where the Notebook runs | fix: pip install "widgetsnbextension==3.*"'),
    ({"nbextension_enabled": False}, "jupyter-js-widgets/extension) is disabled | fix: jupyter nbextension enable"),
    ({"widgetsnbextension": "4.0.16"}, "needs widgetsnbextension 3.x, but the Notebook has 4.0.16"),
    # Colab's list pins 3.6.10 beside 7.7.1 (Colab draws with its own page); in Notebook 6 that page loses Output
    ({"widgetsnbextension": "3.6.10"}, 'released with widgetsnbextension 3.6.1, but the Notebook has 3.6.10: '
                                       'another release\'s page'),
])
def test_each_classic_notebook_problem_is_found_with_its_fix(extension, says):
    assert says in problems(classic(**extension))["widget extension"]


def test_a_release_pair_is_asked_only_where_it_is_known():
    fix = problems(classic(widgetsnbextension="3.6.10"))["widget extension"]
    assert fix.endswith('fix: pip install "widgetsnbextension==3.6.1" where the Notebook runs, then restart the '
                        'Notebook server and reload the page')
    for kernel, page in (("7.8.5", "3.6.10"), ("7.6.5", "3.6.10")):  # the pair; a release with no pair known here
        facts = dataclasses.replace(classic(widgetsnbextension=page), versions={**classic().versions,
                                                                                 "ipywidgets": kernel})
        assert "widget extension" not in problems(facts)


def test_notebook_7_is_checked_like_jupyterlab():
    facts = classic(notebook="7.5.0")  # built on JupyterLab's parts: its labextension (5.x here) counts
    assert "needs the widget extension 3.x" in problems(facts)["widget extension"]


def test_nbextension_facts_read_the_notebook_config_the_user_one_first(tmp_path):
    user, env = tmp_path / "user", tmp_path / "env"
    (env / "nbconfig" / "notebook.d").mkdir(parents=True)
    (env / "nbconfig" / "notebook.d" / "widgetsnbextension.json").write_text(
        json.dumps({"load_extensions": {"jupyter-js-widgets/extension": True}}))
    assert doc.nbextension_facts([str(user), str(env)])["nbextension_enabled"] is True
    (user / "nbconfig").mkdir(parents=True)
    (user / "nbconfig" / "notebook.json").write_text(json.dumps({"load_extensions": {"jupyter-js-widgets/extension": False}}))
    assert doc.nbextension_facts([str(user), str(env)])["nbextension_enabled"] is False
    assert doc.nbextension_facts([str(tmp_path / "none")])["nbextension_enabled"] is None


@pytest.mark.parametrize("argv, server", [
    (["/usr/bin/python3", "-m", "notebook", "--no-browser"], True), (["/venv/bin/python", "-m", "jupyterlab"], True),
    (["/usr/bin/python3", "/usr/local/bin/jupyter-notebook"], True), (["/usr/bin/python3", "-m", "pytest"], False),
    (["/usr/bin/python3", "-c", "print(1)", "notebook"], False), (["/usr/bin/bash"], False),
])
def test_a_server_started_as_python_dash_m_is_found(argv, server):
    assert doc.is_server(argv) is server
    if server:
        assert hosts.front_end(argv) in ("Jupyter Notebook", "JupyterLab")
