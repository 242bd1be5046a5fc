"""The doctor finds each simulated problem, says how to fix it, and says "all good" otherwise."""
import dataclasses
import re
import subprocess
import sys
from pathlib import Path

import pytest

import widgets
from widgets.lab import hosts
from widgets.lab import doctor as doc

ROOT = Path(__file__).resolve().parents[2]
PINS = {"ipywidgets": "8.1.9", "jupyterlab_widgets": "3.0.17", "torch": "2.13.0", "matplotlib": "3.11.2"}
VERSIONS = {**{n: "1.0" for n in (*doc.NEEDED, *hosts.PURE)}, **PINS, "torch": "2.13.0+cpu"}
LAB_PAGE = {"jupyterlab_widgets": "3.0.17", "widgetsnbextension": "4.0.14", "notebook": "7.4.0"}


def healthy(**changes) -> doc.Facts:
    return dataclasses.replace(doc.Facts("JupyterLab", VERSIONS, LAB_PAGE, PINS), **changes)


def report(facts: doc.Facts) -> str:
    return repr(doc.Report(doc.diagnose(facts), facts.host))


def test_a_healthy_environment_is_all_good_in_one_line_and_points_at_jupyter_and_pip():
    assert report(healthy()).splitlines() == [
        "widgets.doctor on JupyterLab: all good (packages, widget extension checked)", doc.ELSEWHERE]
    assert "jupyter labextension list" in doc.ELSEWHERE and "pip check" in doc.ELSEWHERE


@pytest.mark.parametrize("changes, says", [
    ({"versions": PINS}, r"\[packages\] not installed.*ipykernel.*fix: pip install -r requirements.txt"),
    ({"versions": {**VERSIONS, "matplotlib": "3.9.0"}}, r"matplotlib 3.9.0 \(pinned 3.11.2\)"),
    ({"host": "Kaggle", "front": {}, "versions": {**VERSIONS, "accelerate": None}},
     r"not installed.*accelerate.*fix: run the notebook's first cell"),
    ({"versions": {**VERSIONS, "ipywidgets": "7.8.5"}, "pins": {}},
     r"ipywidgets 7.8.5, which needs jupyterlab_widgets 1.x where the page is served, but that has 3.0.17"),
    ({"front": {**LAB_PAGE, "jupyterlab_widgets": None}}, r"but that has none.*jupyterlab_widgets==3\.\*"),
    ({"front": {"error": "asking /srv/python failed"}}, r"could not be checked.*jupyter labextension list"),
    ({"host": "Colab", "front": {}}, r"\[widget manager\] this kernel has ipywidgets 8.1.9.*enable_custom_widget_manager"),
])
def test_each_simulated_problem_is_found_with_its_fix(changes, says):
    text = report(healthy(**changes))
    assert " found 1 problem(s):" in text.splitlines()[0]
    assert re.search(says, text, re.S), text


@pytest.mark.parametrize("host, fix", [("Colab", "custom_widget_manager"), ("Kaggle", "Internet on"),
                                       ("VS Code", "Reload Window")])
def test_a_managed_host_is_named_with_its_one_fix_and_no_extension_of_ours(host, fix):
    versions = {**VERSIONS, "ipywidgets": "7.7.1"}
    lines = report(healthy(host=host, front={}, versions=versions, pins={})).splitlines()
    assert lines[0] == f"widgets.doctor on {host}: all good (packages, widget manager checked)"
    assert lines[1].startswith(f"({host}: ") and fix in lines[1]


@pytest.mark.parametrize("ipywidgets, page, says", [
    ("7.7.1", {"widgetsnbextension": "3.6.1"}, None),
    ("7.7.1", {"widgetsnbextension": "3.6.10"}, r"released with widgetsnbextension 3.6.1.*widgetsnbextension==3.6.1"),
    ("7.6.5", {"widgetsnbextension": "3.6.10"}, None),  # no known release pair: the generation is enough
    ("8.1.9", {"widgetsnbextension": "3.6.10"}, r"needs widgetsnbextension 4.x.*but that has 3.6.10"),
    ("7.7.1", {"widgetsnbextension": None}, r"needs widgetsnbextension 3.x.*but that has none"),
])
def test_classic_notebook_6_is_checked_by_its_nbextension_and_the_release_pair(ipywidgets, page, says):
    text = report(healthy(host="Jupyter Notebook", front={**page, "notebook": "6.5.7"}, pins={},
                          versions={**VERSIONS, "ipywidgets": ipywidgets}))
    assert (re.search(says, text, re.S) if says else "all good" in text), text


def test_notebook_7_is_checked_like_jupyterlab():
    front = {**LAB_PAGE, "jupyterlab_widgets": "1.1.7"}
    assert "needs jupyterlab_widgets 3.x" in report(healthy(host="Jupyter Notebook", front=front))


def test_the_page_is_read_in_the_servers_own_python():
    here = doc.front_facts(None)
    assert doc.front_facts([sys.executable, "-m", "jupyterlab"]) == here
    assert "error" in doc.front_facts([str(ROOT / "no-such-python"), "/srv/venv/bin/jupyter-lab"])
    assert doc.front_facts([str(ROOT / "no-such-python"), "-m", "http.server"]) == here  # not a server: asked here


def test_from_a_shell_it_exits_0_when_all_is_good():
    done = subprocess.run([sys.executable, "-m", "widgets.lab.doctor"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("widgets.doctor: all good")


def test_the_package_exposes_doctor():
    assert widgets.doctor is doc.doctor
