"""The install on a hosted runtime: never over the runtime's own torch, numpy, ipykernel or ipywidgets,
always --no-deps, only what is missing and pure Python; the install cell does nothing elsewhere."""
from __future__ import annotations

import re
import shlex
import subprocess
import types
from importlib import metadata
from pathlib import Path

import pytest
from IPython.core.inputtransformer2 import TransformerManager

from widgets.lab import hosts
from tests.test_install import LEARNER, norm, requirements

ROOT = Path(__file__).resolve().parents[2]


def names_in(command: list[str]) -> set[str]:
    """The package names a pip command installs (its arguments that are not options)."""
    return {norm(re.match(r"[A-Za-z0-9_.\-]+", arg)[0]) for arg in command[command.index("install") + 1:]
            if not arg.startswith("-")}


def cell_pip_line(source: str) -> list[str]:
    """The %pip line's words as IPython runs it, with `{lab}` put in as IPython does."""
    (line,) = [ln.strip() for ln in source.splitlines() if ln.strip().startswith("%pip")]
    (lab,) = [ln.split("=", 1)[1].strip().strip('"') for ln in source.splitlines() if ln.strip().startswith("lab =")]
    return shlex.split(line[1:].replace("{lab}", lab))


def test_the_install_cell_installs_the_lab_at_a_tag_with_no_deps_and_nothing_of_the_runtimes():
    source = hosts.cell_source("ada/accumulation-lab", "v0.2.0")
    words = cell_pip_line(source)
    assert words == ["pip", "install", "--no-deps",
                     "gradient-accumulation-lab @ git+https://github.com/ada/accumulation-lab@v0.2.0"]
    assert not names_in(words) & set(hosts.NEVER)
    assert "install_missing()" in source
    # the default: the placeholder the Binder badge uses too, at this lab's version
    binder = (ROOT / "README.md").read_text().split("mybinder.org/v2/gh/")[1].split("/HEAD")[0]
    assert f"github.com/{binder}@v{metadata.version(hosts.DISTRIBUTION)}" in " ".join(cell_pip_line(hosts.cell_source()))


@pytest.mark.parametrize("repository, tag", [
    ("ada", "v1"), ("ada/lab; rm -rf ~", "v1"), ("ada/lab", 'v1" && echo'), ("ada/lab", "v1 --pre"),
])
def test_a_repository_or_tag_that_is_not_one_is_refused(repository, tag):
    with pytest.raises(ValueError, match="repository must be|tag must be"):
        hosts.cell_source(repository, tag)


def run_cell(source: str, environ: dict, monkeypatch) -> tuple[list[str], list[str]]:
    """Run the cell as IPython would (magics included), with `%pip` and install_missing recorded."""
    magics, calls = [], []
    monkeypatch.setattr(hosts, "install_missing", lambda: calls.append("install_missing"))
    namespace = {}
    # IPython formats a magic's line with the cell's variables before the magic sees it
    shell = types.SimpleNamespace(run_line_magic=lambda name, line: magics.append(f"%{name} {line.format(**namespace)}"))
    namespace["get_ipython"] = lambda: shell
    monkeypatch.setattr("os.environ", environ)
    exec(TransformerManager().transform_cell(source), namespace)
    return magics, calls


def test_off_a_hosted_runtime_the_cell_only_says_so_in_one_line(monkeypatch, capsys):
    magics, calls = run_cell(hosts.cell_source(), {"PATH": "/usr/bin", "VSCODE_PID": "1"}, monkeypatch)
    assert (magics, calls) == ([], [])
    assert capsys.readouterr().out == "Not on Colab or Kaggle: nothing to install.\n"


@pytest.mark.parametrize("variable", ["COLAB_RELEASE_TAG", "KAGGLE_KERNEL_RUN_TYPE"])
def test_on_colab_or_kaggle_the_cell_installs_the_lab_then_what_is_missing(monkeypatch, capsys, variable):
    magics, calls = run_cell(hosts.cell_source("ada/lab", "v1"), {variable: "x"}, monkeypatch)
    assert magics == ['%pip install --no-deps "gradient-accumulation-lab @ git+https://github.com/ada/lab@v1"']
    assert calls == ["install_missing"] and capsys.readouterr().out == ""


def test_install_missing_adds_only_what_is_missing_with_no_deps(capsys):
    present = {"tqdm": "4.67.1", "accelerate": "1.14.0", hosts.DISTRIBUTION: "0.1.0", "ipywidgets": "7.7.1"}
    commands = []

    def run(command, check):
        commands.append(command)
        return subprocess.CompletedProcess(command, 0)

    added = hosts.install_missing(run=run, installed=present.get)
    assert added == ["pytorch-lightning==2.6.6", "lightning-utilities==0.15.3", "torchmetrics==1.9.0"]
    (command,) = commands
    assert "--no-deps" in command and names_in(command) == {"pytorch-lightning", "lightning-utilities", "torchmetrics"}
    said = capsys.readouterr().out
    assert said.startswith("The lab 0.1.0 is installed (added pytorch-lightning==2.6.6, lightning-utilities==0.15.3, ")
    assert "torch, numpy, ipykernel and ipywidgets are this runtime's own" in said


def test_install_missing_with_everything_there_installs_nothing(capsys):
    present = {**hosts.PURE, hosts.DISTRIBUTION: "0.1.0"}
    assert hosts.install_missing(run=pytest.fail, installed=present.get) == []
    assert "(nothing else was missing)" in capsys.readouterr().out


def test_a_failed_install_says_what_to_do_on_kaggle():
    def run(command, check):
        return subprocess.CompletedProcess(command, 1)

    with pytest.raises(RuntimeError, match=r"switch Internet on \(Settings > Internet\)"):
        hosts.install_missing(run=run, installed={hosts.DISTRIBUTION: "0.1.0"}.get)


@pytest.mark.parametrize("ipywidgets, switched", [("8.1.9", True), ("7.7.1", False)])
def test_on_colab_with_ipywidgets_8_the_install_switches_on_its_widget_manager(monkeypatch, capsys, ipywidgets,
                                                                               switched):
    calls = []
    colab = types.SimpleNamespace(output=types.SimpleNamespace(enable_custom_widget_manager=lambda: calls.append(1)))
    monkeypatch.setitem(__import__("sys").modules, "google.colab", colab)
    present = {**hosts.PURE, hosts.DISTRIBUTION: "0.1.0", "ipywidgets": ipywidgets}
    hosts.install_missing(run=pytest.fail, installed=present.get)
    assert bool(calls) is switched
    assert ("widget manager for ipywidgets 8 is on" in capsys.readouterr().out) is switched


def test_what_the_install_adds_is_pure_python_at_the_tested_versions_and_never_the_runtimes_own():
    assert not {norm(n) for n in hosts.PURE} & set(hosts.NEVER)
    for name, version in hosts.PURE.items():
        assert LEARNER.get(norm(name), metadata.version(name)) == version, name
        wheel = metadata.distribution(name).read_text("WHEEL") or ""
        assert "Root-Is-Purelib: true" in wheel, f"{name} is not pure Python"


def test_what_the_added_packages_need_is_on_colab_already():
    """Installed with --no-deps on Colab (requirements-colab.txt, its list), nothing they import is missing."""
    colab, _ = requirements(ROOT / "requirements-colab.txt")
    for name in hosts.PURE:
        for requirement in metadata.requires(name) or []:
            if ";" in requirement:
                continue  # an extra or another platform's
            needed = norm(re.match(r"\s*([A-Za-z0-9_.\-]+)", requirement)[1])
            assert needed in {norm(n) for n in hosts.PURE} or needed in colab, f"{name} needs {needed}"


@pytest.mark.parametrize("environ, argv, host", [
    ({"COLAB_RELEASE_TAG": "release-colab_20260801"}, (), "Colab"),
    ({"KAGGLE_KERNEL_RUN_TYPE": "Interactive"}, (), "Kaggle"),
    ({"VSCODE_PID": "4242"}, (), "VS Code"),
    ({"VSCODE_CWD": "/home/ada"}, (), "VS Code"),
    ({}, ["/lab/.venv/bin/python", "-m", "jupyterlab", "notebooks/00_start_here.ipynb"], "JupyterLab"),
    ({}, ["/usr/bin/python3", "/usr/local/bin/jupyter-lab", "--no-browser"], "JupyterLab"),
    ({}, ["/opt/venv/bin/python", "/opt/venv/bin/jupyterhub-singleuser"], "JupyterLab"),
    ({}, ["C:\\lab\\.venv\\Scripts\\python.exe", "C:\\lab\\.venv\\Scripts\\jupyter-lab.exe"], "JupyterLab"),
    ({}, ["/usr/bin/python3", "/usr/local/bin/jupyter-notebook"], "Jupyter Notebook"),
    ({}, ["/usr/bin/python3", "-m", "notebook"], "Jupyter Notebook"),
    ({}, ["/lab/.venv/bin/python", "/lab/.venv/bin/voila", "present/explorer.ipynb"], "Voilà"),
    ({}, ["/usr/bin/python3", "/usr/local/bin/jupyter-server"], "Jupyter"),
    # a JupyterLab started from VS Code's terminal inherits its variables: the server decides
    ({"VSCODE_PID": "4242"}, ["/lab/.venv/bin/python", "-m", "jupyterlab"], "JupyterLab"),
    ({"COLAB_RELEASE_TAG": "x", "VSCODE_PID": "1"}, ["python", "-m", "jupyterlab"], "Colab"),
    ({"PATH": "/usr/bin"}, (), "Python"),
])
def test_the_host_is_read_from_the_environment_and_the_server(environ, argv, host):
    assert hosts.detect(environ, argv) == host
