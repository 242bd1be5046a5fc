"""`widgets.doctor()` (`make doctor` from a shell): the lab's own checks of why its widgets might not show, each
problem with its fix; stdlib only, so it runs where torch is broken."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from widgets.lab.hosts import HOSTED, PURE, detect, version_of

ROOT = Path(__file__).resolve().parents[2]
NEEDED = ("ipywidgets", "jupyterlab_widgets", "ipykernel", "matplotlib", "torch", "tqdm")
FRONT = ("jupyterlab_widgets", "widgetsnbextension", "notebook")  # what draws widgets, where the page is served
# ipywidgets major -> the majors of the same generation: (jupyterlab_widgets, widgetsnbextension)
GENERATIONS = {7: (1, 3), 8: (3, 4)}
# Classic Notebook 6 needs the widgetsnbextension released with the kernel's ipywidgets 7: 3.6.10's page
# cannot build 7.7.1's Output widget, which then shows nothing (tests/test_browser_ipywidgets7.py).
RELEASED_WITH = {"7.7.1": "3.6.1", "7.8.0": "3.6.5", "7.8.1": "3.6.6", "7.8.2": "3.6.7", "7.8.3": "3.6.8",
                 "7.8.4": "3.6.9", "7.8.5": "3.6.10"}
COLAB_MANAGER = "from google.colab import output; output.enable_custom_widget_manager()"
# Hosts that draw widgets with their own manager, and the one thing that makes them show there.
HOST_FIXES = {
    "Colab": f"ipywidgets 8 shows only after `{COLAB_MANAGER}` (the notebook's install cell runs it)",
    "Kaggle": "the first cell installs the lab and needs Internet on (Settings > Internet)",
    "VS Code": "keep the Jupyter extension up to date; a widget stuck at 'Loading widget...': Developer: "
               "Reload Window, then run the cell again",
}
ELSEWHERE = "Beyond the lab's own checks: `jupyter labextension list` and `pip check` (where JupyterLab runs)."
# Run by the server's Python: every installed distribution's version, by normalised name.
PROBE = ("import json, importlib.metadata as m; print(json.dumps({d.metadata['Name'].lower().replace('-', '_'): "
         "d.version for d in m.distributions()}))")


@dataclass(frozen=True)
class Facts:
    host: str  # hosts.detect(): "Colab", "Kaggle", "VS Code", "JupyterLab", "Jupyter Notebook", ..., "Python"
    versions: dict  # distribution -> version in the kernel's environment (None: not installed)
    front: dict  # FRONT -> version where the page is served; {"error": ...} when that could not be asked
    pins: dict  # requirements.txt: the versions the notebooks were executed with


@dataclass(frozen=True)
class Finding:
    check: str
    problem: str = ""  # empty: this check passed
    fix: str = ""


@dataclass
class Report:
    """Shows "all good" or each problem with its fix, naming the host where one is known."""

    findings: list[Finding]
    host: str = "Python"

    @property
    def ok(self) -> bool:
        return not any(f.problem for f in self.findings)

    def __repr__(self) -> str:
        where = "" if self.host == "Python" else f" on {self.host}"  # "Python": no front end (a shell, a test)
        problems = [f for f in self.findings if f.problem]
        lines = [f"widgets.doctor{where} found {len(problems)} problem(s):" if problems
                 else f"widgets.doctor{where}: all good ({', '.join(f.check for f in self.findings)} checked)"]
        if self.host in HOST_FIXES:
            lines.append(f"({self.host}: {HOST_FIXES[self.host]})")
        for i, f in enumerate(problems, 1):
            lines += [f"{i}. [{f.check}] {f.problem}", f"   fix: {f.fix}"]
        return "\n".join([*lines, ELSEWHERE])


def _major(version: str | None) -> int | None:
    match = re.match(r"(\d+)", version or "")
    return int(match[1]) if match else None


def diagnose(f: Facts) -> list[Finding]:
    return [_packages(f), _widgets(f)]


def _packages(f: Facts) -> Finding:
    hosted = f.host in HOSTED.values()
    missing = [name for name in (*NEEDED, *(PURE if hosted else ())) if not f.versions.get(name)]
    if missing:
        fix = ("run the notebook's first cell: it installs what the lab lacks here" if hosted else
               "pip install -r requirements.txt (in the environment of this kernel), then restart the kernel")
        return Finding("packages", f"not installed in this kernel's environment: {', '.join(missing)}", fix)
    off = [f"{name} {f.versions[name]} (pinned {pin})" for name, pin in sorted(f.pins.items())
           if f.versions.get(name) and f.versions[name].split("+")[0] != pin]
    if off:
        return Finding("packages", f"versions differ from requirements.txt: {', '.join(off)}; outputs may differ "
                       "from the notebooks'", "pip install -r requirements.txt, then Kernel > Restart Kernel and Run All Cells")
    return Finding("packages")


def _widgets(f: Facts) -> Finding:
    kernel = f.versions.get("ipywidgets")
    if f.host in HOST_FIXES:  # their own widget manager: no extension of ours to check
        if f.host == "Colab" and (_major(kernel) or 0) >= 8:
            return Finding("widget manager", f"this kernel has ipywidgets {kernel}: Colab shows ipywidgets 8 only "
                           "through its custom widget manager", f"run `{COLAB_MANAGER}` once in this session, then "
                           "run the widget's cell again; or keep Colab's own ipywidgets 7.7.1")
        return Finding("widget manager")
    if f.front.get("error"):
        return Finding("widget extension", f"the widget extension could not be checked: {f.front['error']}",
                       "run `jupyter labextension list` where JupyterLab runs")
    classic = f.host == "Jupyter Notebook" and (_major(f.front.get("notebook")) or 7) < 7
    name, index = ("widgetsnbextension", 1) if classic else ("jupyterlab_widgets", 0)
    page, want = f.front.get(name), GENERATIONS.get(_major(kernel) or 8, GENERATIONS[8])[index]
    restart = "; then restart the kernel and the server, and reload the page"
    if _major(page) != want:
        return Finding("widget extension", f"the kernel has ipywidgets {kernel}, which needs {name} {want}.x where "
                       f"the page is served, but that has {page or 'none'}",
                       f'pip install "{name}=={want}.*" in the environment that runs the server{restart}')
    paired = RELEASED_WITH.get(kernel or "") if classic else None
    if paired and page != paired:
        return Finding("widget extension", f"the kernel has ipywidgets {kernel}, released with widgetsnbextension "
                       f"{paired}, but the Notebook has {page}: another release's page, which may not draw every "
                       "widget of this one", f'pip install "widgetsnbextension=={paired}" where the Notebook runs{restart}')
    return Finding("widget extension")


def front_facts(argv: list[str] | None) -> dict:
    """FRONT's versions where the page is served: in the Python running the server command line `argv` (a console
    script runs as python + script), else in this one; a failure is an "error"."""
    if not (argv and detect({}, argv) != "Python" and re.search(r"python[\d.]*(\.exe)?$", argv[0])):
        return {name: version_of(name) for name in FRONT}
    try:
        versions = json.loads(subprocess.run([argv[0], "-c", PROBE], capture_output=True, text=True, timeout=60).stdout)
        return {name: versions.get(name) for name in FRONT}
    except (OSError, subprocess.TimeoutExpired, ValueError) as error:
        return {"error": f"asking {argv[0]} failed ({error})"}


def doctor(shell: bool = False) -> Report:
    """Check this kernel's environment (`shell`: this environment's, from `make doctor`): "all good", or each problem
    with its fix."""
    argv = []
    if not shell:
        try:  # the command line of the server that started this kernel (Linux /proc)
            argv = Path(f"/proc/{os.getppid()}/cmdline").read_bytes().decode().split("\0")
        except OSError:
            pass
    host = "Python" if shell else detect(server_argv=argv)
    requirements = ROOT / "requirements.txt"  # the versions the notebooks were executed with
    text = requirements.read_text() if requirements.exists() else ""
    pins = {m[1].lower().replace("-", "_"): m[2] for m in re.finditer(r"^([A-Za-z0-9_.\-]+)==(\S+)", text, re.M)}
    facts = Facts(host, {name: version_of(name) for name in {*NEEDED, *PURE, *pins}},
                  {} if host in HOST_FIXES else front_facts(argv), pins)
    return Report(diagnose(facts), facts.host)


if __name__ == "__main__":
    report = doctor(shell=True)
    print(report)
    sys.exit(0 if report.ok else 1)
