"""`widgets.doctor()`: why the widgets don't show, checked from inside the kernel, each problem with its fix.

    import widgets; widgets.doctor()            # in a notebook: "all good", or the problems
    python -m widgets.lab.doctor                # from a shell (`make doctor`); exit status 1 on a problem

Checks: the host (Colab, Kaggle, VS Code, JupyterLab, ...: `hosts.detect`), named in the report with
its own advice; the kernel's Python against the lab's (.venv of this checkout) and against the Python
that runs JupyterLab (the kernel's parent process); the packages the notebooks need, and their pins
(in the lab's own environment) or the ranges the lab declares (elsewhere); on a Jupyter front end, the
ipywidgets generation against the widget extension's, and that the extension is installed and
enabled; on Colab, Kaggle or VS Code, what their widget manager needs instead; the torch build and its
thread count against the usable cores; the matplotlib backend; the free memory against the heaviest
notebook's measured peak.

Two halves: `collect()` reads the facts (files, package metadata, /proc; torch is asked in a
subprocess unless the kernel already imported it), `diagnose(facts)` turns them into findings and
is pure, so tests feed it simulated broken environments. Standard library only: this file also
runs as a script in JupyterLab's own environment (`--probe`) to read its widget extension, so what it
takes from `widgets` (hosts, the results file) is imported where it is used, never at the top.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXTENSION = "@jupyter-widgets/jupyterlab-manager"
SERVER_MODULES = ("notebook", "nbclassic", "jupyterlab", "jupyter_server", "voila")  # python -m <one of these>
# ipywidgets major -> (jupyterlab_widgets major, widget extension major) of the same generation
GENERATIONS = {7: (1, 3), 8: (3, 5)}
# Classic Notebook (6.x, before it was built on JupyterLab's parts) shows widgets through an nbextension:
# ipywidgets major -> widgetsnbextension major.
NBEXTENSION, NB_GENERATIONS = "jupyter-js-widgets/extension", {7: 3, 8: 4}
# Within ipywidgets 7 the page must be the kernel's own release, not only of its generation: an ipywidgets 7
# release -> the widgetsnbextension released with it (7.7.1: the pair Colab's list names; 7.8.x: each requires
# its own at least, PyPI's metadata). Measured here (tests/test_browser_ipywidgets7.py): in Notebook 6.5.7,
# widgetsnbextension 3.6.10's page cannot build ipywidgets 7.7.1's Output widget, which then shows nothing.
NB_RELEASED_WITH = {"7.7.1": "3.6.1", "7.8.0": "3.6.5", "7.8.1": "3.6.6", "7.8.2": "3.6.7", "7.8.3": "3.6.8",
                    "7.8.4": "3.6.9", "7.8.5": "3.6.10"}
NEEDED = ("ipywidgets", "jupyterlab_widgets", "ipykernel", "matplotlib", "torch", "tqdm")
NOTEBOOK_BACKENDS = ("inline", "module://matplotlib_inline.backend_inline", "agg", "widget", "ipympl",
                     "module://ipympl.backend_nbagg", "nbagg", "svg", "pdf")
FALLBACK_NEED_MB = 600  # used when benchmarks/results.json (the measured peaks) is not there
# Hosts whose page is not a JupyterLab or Notebook of the kernel's machine: no widget extension to read there.
MANAGED = ("Colab", "Kaggle", "VS Code")
COLAB_MANAGER = "from google.colab import output; output.enable_custom_widget_manager()"
# Said under the report's first line on these hosts, problems or not: what makes widgets show there.
HOST_NOTES = {
    "Colab": "Colab shows ipywidgets 7 (its own 7.7.1) as they are, and ipywidgets 8 only after "
             f"`{COLAB_MANAGER}` in the session (the notebook's install cell runs it)",
    "Kaggle": "the notebook's first cell installs the lab and needs Internet on (Settings > Internet, a "
              "phone-verified account); Kaggle's page shows core widgets only, which are all the lab uses",
    "VS Code": "widgets show through the Jupyter extension (ms-toolsai.jupyter), which bundles the core widgets "
               "the lab uses: keep it up to date; a widget stuck at 'Loading widget...': Developer: Reload "
               "Window, then run the cell again",
}


@dataclass
class Facts:
    """What `diagnose` looks at; every field may be simulated in a test."""

    kernel_prefix: str
    kernel_python: str
    lab_prefix: str | None  # this checkout's .venv, if there is one
    server_prefix: str | None  # the environment JupyterLab runs from (None: not started by Jupyter)
    versions: dict[str, str | None]  # distribution -> version in the kernel's environment
    pins: dict[str, str]  # requirements.txt
    # in the environment serving the page: {"version", "disabled", "jupyterlab_widgets", "where"}, and
    # "problems" (its settings files that cannot be read) or "error" (it could not be asked) when there are any
    extension: dict
    torch: dict  # {"version", "cuda", "threads", "error"}
    usable_cpus: int
    backend: str | None
    available_mb: int | None
    need_mb: int
    notes: list[str] = field(default_factory=list)
    host: str = "Python"  # hosts.detect(): "Colab", "Kaggle", "VS Code", "JupyterLab", ..., "Python" (none)
    declared: dict[str, str] = field(default_factory=dict)  # name -> the range the lab declares (pyproject)


@dataclass(frozen=True)
class Finding:
    check: str
    problem: str = ""  # empty: this check passed
    fix: str = ""

    @property
    def ok(self) -> bool:
        return not self.problem


class Report:
    """The findings; shows "all good" or each problem with its fix, naming the host where one is known."""

    def __init__(self, findings: list[Finding], facts: Facts | None = None, verbose: bool = False):
        self.findings, self.facts, self.verbose = findings, facts, verbose

    @property
    def problems(self) -> list[Finding]:
        return [f for f in self.findings if not f.ok]

    @property
    def ok(self) -> bool:
        return not self.problems

    def __repr__(self) -> str:
        host = self.facts.host if self.facts is not None else "Python"
        where = "" if host == "Python" else f" on {host}"  # "Python": no front end found (a shell, a test run)
        if self.ok:
            checks = ", ".join(dict.fromkeys(f.check for f in self.findings))
            lines = [f"widgets.doctor{where}: all good ({checks} checked)"]
        else:
            lines = [f"widgets.doctor{where} found {len(self.problems)} problem(s):"]
        if host in HOST_NOTES:
            lines.append(f"({host}: {HOST_NOTES[host]})")
        for i, f in enumerate(self.problems, 1):
            lines += [f"{i}. [{f.check}] {f.problem}", f"   fix: {f.fix}"]
        if self.verbose and self.facts is not None:
            lines += ["", "facts:", json.dumps(asdict(self.facts), indent=2, default=str)]
        return "\n".join(lines)


def diagnose(facts: Facts) -> list[Finding]:
    """Each check's finding, problems first within a check, from `facts` alone."""
    return [*_python(facts), *_packages(facts), *_extension(facts), *_torch(facts), *_backend(facts), *_memory(facts)]


def _python(f: Facts) -> list[Finding]:
    found = []
    if f.lab_prefix and not _same(f.kernel_prefix, f.lab_prefix):
        found.append(Finding(
            "python", f"this kernel runs {f.kernel_python}, not the lab's Python ({f.lab_prefix}/bin/python)",
            "start JupyterLab with `make lab` and use its kernel 'Python 3 (ipykernel)' (Kernel > Change Kernel...), "
            "or install the lab into this environment: pip install -r requirements.txt"))
    if f.server_prefix and not _same(f.kernel_prefix, f.server_prefix):
        found.append(Finding(
            "python", f"JupyterLab runs from {f.server_prefix}, this kernel from {f.kernel_prefix}: the page's widget "
            "extension and the kernel's ipywidgets come from two environments",
            "start JupyterLab from the lab's environment (`make lab`), or install the same pins in both"))
    return found or [Finding("python")]


def _packages(f: Facts) -> list[Finding]:
    from widgets.lab.hosts import HOSTED, PURE

    hosted = f.host in HOSTED.values()
    missing = [name for name in (*NEEDED, *(PURE if hosted else ())) if not f.versions.get(name)]
    if missing:
        fix = ("run the notebook's first cell: it installs what the lab lacks here" + (
            " (switch Internet on first: Settings > Internet)" if f.host == "Kaggle" else "") if hosted else
               "pip install -r requirements.txt (in the environment of this kernel), then restart the kernel")
        return [Finding("packages", f"not installed in this kernel's environment: {', '.join(missing)}", fix)]
    off = {name: (f.versions[name], pin) for name, pin in f.pins.items()
           if name in f.versions and f.versions[name] and f.versions[name].split("+")[0] != pin}
    if off:
        listed = ", ".join(f"{n} {have} (pinned {pin})" for n, (have, pin) in sorted(off.items()))
        return [Finding("packages", f"versions differ from requirements.txt: {listed}; outputs may differ from the notebooks'",
                        "pip install -r requirements.txt, then Kernel > Restart Kernel and Run All Cells")]
    outside = {name: (f.versions[name], spec) for name, spec in f.declared.items()
               if not f.pins and f.versions.get(name) and not in_range(f.versions[name], spec)}
    if outside:
        listed = ", ".join(f"{n} {have} (tested: {spec})" for n, (have, spec) in sorted(outside.items()))
        return [Finding("packages", f"outside the versions the lab is tested with: {listed}; a notebook may print "
                        "other numbers or fail", "use versions in the tested range (README, \"Installing\"), e.g. "
                        "pip install " + " ".join(f'"{n}{spec}"' for n, (_, spec) in sorted(outside.items())))]
    return [Finding("packages")]


def _release(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", re.split(r"[+a-z]", version)[0]))


def in_range(version: str, spec: str) -> bool:
    """Whether `version` meets `spec`, comma-separated >=, <=, <, >, ==, != on release numbers (the ranges
    pyproject.toml declares; pre-releases and local labels read as their release, other operators pass)."""
    for op, bound in re.findall(r"(>=|<=|==|!=|<|>)\s*([^,\s]+)", spec):
        have, want = _release(version), _release(bound)
        width = max(len(have), len(want))
        a, b = (have + (0,) * width)[:width], (want + (0,) * width)[:width]
        if not {">=": a >= b, "<=": a <= b, ">": a > b, "<": a < b, "==": a == b, "!=": a != b}[op]:
            return False
    return True


def _major(version: str | None) -> int | None:
    match = re.match(r"(\d+)", version or "")
    return int(match[1]) if match else None


def _extension(f: Facts) -> list[Finding]:
    if f.host in MANAGED:
        return _manager(f)
    ext = f.extension
    if f.host == "Jupyter Notebook" and (_major(ext.get("notebook")) or 7) < 7:
        return _nbextension(f)
    if ext.get("problems"):  # before "not installed": an unreadable file is why nothing could be found
        return [Finding("widget extension", "JupyterLab's extension settings cannot be read: " + "; ".join(ext["problems"]),
                        'fix the file (it must be one JSON object, e.g. {"disabledExtensions": {}}) or move it away, '
                        "then restart JupyterLab and reload the page")]
    if ext.get("error"):
        return [Finding("widget extension", f"the widget extension could not be checked: {ext['error']}",
                        "run `make doctor` in a shell to see the whole error; reinstall with "
                        "pip install -r requirements.txt in JupyterLab's environment if it persists")]
    if not ext.get("version"):
        return [Finding("widget extension", f"JupyterLab's widget extension ({EXTENSION}) is not installed where "
                        "JupyterLab runs", "pip install jupyterlab_widgets==" + f.pins.get("jupyterlab_widgets", "3.0.17")
                        + " in JupyterLab's environment, then restart JupyterLab and reload the page")]
    if ext.get("disabled"):
        return [Finding("widget extension", f"the widget extension {EXTENSION} is disabled",
                        f"jupyter labextension enable {EXTENSION}, then reload the page")]
    kernel = _major(f.versions.get("ipywidgets"))
    if kernel in GENERATIONS and _major(ext["version"]) != GENERATIONS[kernel][1]:
        want_lw, want_ext = GENERATIONS[kernel]
        return [Finding(
            "widget extension", f"the kernel has ipywidgets {f.versions['ipywidgets']}, which needs the widget extension "
            f"{want_ext}.x (jupyterlab_widgets {want_lw}.x), but the page has {ext['version']} "
            f"(jupyterlab_widgets {ext.get('jupyterlab_widgets') or '?'})",
            "install the pinned pair in both environments: pip install ipywidgets==" + f.pins.get("ipywidgets", "8.1.9")
            + " jupyterlab_widgets==" + f.pins.get("jupyterlab_widgets", "3.0.17")
            + "; then restart the kernel, reload the page, and restart JupyterLab if it was running")]
    return [Finding("widget extension")]


def _nbextension(f: Facts) -> list[Finding]:
    """Classic Notebook 6: the widgetsnbextension of the Notebook's environment, enabled, of the kernel's generation."""
    ext, kernel = f.extension, _major(f.versions.get("ipywidgets"))
    want = NB_GENERATIONS.get(kernel or 8, 4)
    restart = ", then restart the Notebook server and reload the page"
    if not ext.get("widgetsnbextension"):
        return [Finding("widget extension", f"Notebook {ext['notebook']}'s widget extension (widgetsnbextension) is not "
                        "installed where the Notebook runs", f'pip install "widgetsnbextension=={want}.*" there{restart}')]
    if ext.get("nbextension_enabled") is False:
        return [Finding("widget extension", f"the Notebook's widget extension ({NBEXTENSION}) is disabled",
                        f"jupyter nbextension enable --py widgetsnbextension --sys-prefix{restart}")]
    if kernel in NB_GENERATIONS and _major(ext["widgetsnbextension"]) != want:
        return [Finding("widget extension", f"the kernel has ipywidgets {f.versions['ipywidgets']}, which needs "
                        f"widgetsnbextension {want}.x, but the Notebook has {ext['widgetsnbextension']}",
                        f'pip install "widgetsnbextension=={want}.*" where the Notebook runs{restart}')]
    paired = NB_RELEASED_WITH.get(f.versions.get("ipywidgets") or "")
    if paired and ext["widgetsnbextension"] != paired:
        return [Finding("widget extension", f"the kernel has ipywidgets {f.versions['ipywidgets']}, released with "
                        f"widgetsnbextension {paired}, but the Notebook has {ext['widgetsnbextension']}: another "
                        "release's page, which may not draw every widget of this one (3.6.10's page shows "
                        "nothing for ipywidgets 7.7.1's Output)",
                        f'pip install "widgetsnbextension=={paired}" where the Notebook runs{restart}')]
    return [Finding("widget extension")]


def _manager(f: Facts) -> list[Finding]:
    """Colab, Kaggle and VS Code draw widgets with their own manager: no extension of ours to check."""
    if f.host == "Colab" and (_major(f.versions.get("ipywidgets")) or 0) >= 8:
        return [Finding("widget manager", f"this kernel has ipywidgets {f.versions['ipywidgets']}: Colab shows "
                        "ipywidgets 8 only through its custom widget manager",
                        f"run `{COLAB_MANAGER}` once in this session (the notebook's install cell does), then run the "
                        "widget's cell again; or keep Colab's own ipywidgets 7.7.1, which the lab works with as well")]
    return [Finding("widget manager")]


def _torch(f: Facts) -> list[Finding]:
    t = f.torch
    if t.get("error"):
        return [Finding("torch", f"torch does not import in this kernel: {t['error']}",
                        "pip install -r requirements.txt (or `make lab TORCH=cpu` for the small CPU build)")]
    if t.get("threads") and t["threads"] > f.usable_cpus:
        return [Finding("torch", f"torch uses {t['threads']} threads on {f.usable_cpus} usable core(s): they fight "
                        "and every cell gets slower", f"run torch.set_num_threads({f.usable_cpus}) at the top, or set "
                        f"OMP_NUM_THREADS={f.usable_cpus} before starting JupyterLab")]
    return [Finding("torch")]


def _backend(f: Facts) -> list[Finding]:
    if f.backend and f.backend.lower() not in NOTEBOOK_BACKENDS:
        return [Finding("matplotlib backend", f"matplotlib's backend is {f.backend!r}, which opens windows instead of "
                        "drawing in the notebook", "unset MPLBACKEND before starting JupyterLab, or run %matplotlib inline")]
    return [Finding("matplotlib backend")]


def _memory(f: Facts) -> list[Finding]:
    if f.available_mb is not None and f.available_mb < f.need_mb:
        return [Finding("memory", f"{f.available_mb} MB free; the heaviest notebook's kernel peaks near {f.need_mb} MB",
                        "close other notebooks' kernels (Kernel > Shut Down Kernel) and other programs, then re-run")]
    return [Finding("memory")]


def _same(a: str, b: str) -> bool:
    return os.path.realpath(a) == os.path.realpath(b)


# --- collecting the facts -----------------------------------------------------------------------

def extension_facts(data_dirs: list[str] | None = None, config_dirs: list[str] | None = None) -> dict:
    """The widget extension as the JupyterLab of *this* interpreter sees it (also run as `--probe`)."""
    if data_dirs is None or config_dirs is None:
        try:
            from jupyter_core.paths import jupyter_config_path, jupyter_path
        except ImportError:
            return {"version": None, "disabled": False, "where": None, "jupyterlab_widgets": None}
        data_dirs = jupyter_path("labextensions") if data_dirs is None else data_dirs
        config_dirs = jupyter_config_path() if config_dirs is None else config_dirs
    found = {"version": None, "disabled": False, "where": None, "jupyterlab_widgets": _version("jupyterlab_widgets"),
             **nbextension_facts(config_dirs)}
    problems = []  # files JupyterLab reads that are not what it expects: reported, never a crash
    for folder in data_dirs:
        package = Path(folder, *EXTENSION.split("/"), "package.json")
        if package.exists():
            meta = _json_object(package, problems)
            if meta is not None:
                found.update(version=meta.get("version"), where=str(package.parent))
                break
    for folder in config_dirs:
        page_config = Path(folder, "labconfig", "page_config.json")
        config = _json_object(page_config, problems) if page_config.exists() else None
        disabled = {} if config is None else config.get("disabledExtensions", {})
        if isinstance(disabled, dict):  # JupyterLab 4: {name: true}; older: a list of names
            found["disabled"] |= bool(disabled.get(EXTENSION))
        elif isinstance(disabled, list):
            found["disabled"] |= EXTENSION in disabled
        else:
            problems.append(f"{page_config}: disabledExtensions is a {type(disabled).__name__}, not an object or a list")
    return {**found, "problems": problems} if problems else found


def nbextension_facts(config_dirs: list[str]) -> dict:
    """Classic Notebook's side: its version, widgetsnbextension's, and whether the nbextension is enabled in the
    notebook config the Notebook reads (None: named nowhere). The first of `config_dirs` (jupyter_config_path: the
    user's, then the environment's, then the system's) wins, so they are read last to first."""
    enabled = None
    for folder in reversed(config_dirs):
        nbconfig = Path(folder, "nbconfig")
        files = [*sorted(nbconfig.glob("notebook.d/*.json")), nbconfig / "notebook.json"]
        for path in files:
            config = _json_object(path, []) if path.exists() else None
            loads = (config or {}).get("load_extensions")
            if isinstance(loads, dict) and NBEXTENSION in loads:
                enabled = bool(loads[NBEXTENSION])
    return {"notebook": _version("notebook"), "widgetsnbextension": _version("widgetsnbextension"),
            "nbextension_enabled": enabled}


def _json_object(path: Path, problems: list[str]) -> dict | None:
    """The JSON object in `path`, or None with the reason appended to `problems`."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as error:
        problems.append(f"{path} is not valid JSON ({error})")
        return None
    if not isinstance(data, dict):
        problems.append(f"{path} holds a JSON {type(data).__name__}, not an object")
        return None
    return data


def _version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def server_argv(pid: int | None = None) -> list[str] | None:
    """The command line of the Jupyter server that started this process (Linux /proc), or None."""
    try:
        argv = Path(f"/proc/{pid or os.getppid()}/cmdline").read_bytes().decode().split("\0")
    except OSError:
        return None
    return argv if is_server(argv) else None


def is_server(argv: list[str]) -> bool:
    """Whether a command line runs a Jupyter server: `jupyter-lab`, `jupyter notebook`, `voila`, or
    `python -m notebook` (or another of SERVER_MODULES)."""
    module = argv[2] if len(argv) > 2 and argv[1] == "-m" else ""
    return any(re.search(r"jupyter|voila", part) for part in argv[:3]) or module in SERVER_MODULES


def server_python(pid: int | None = None) -> str | None:
    """The Python running the Jupyter server that started this process (Linux /proc), or None."""
    argv = server_argv(pid)
    if argv is None:
        return None
    first = argv[0]
    if re.search(r"python[\d.]*$", first):
        return first
    try:  # a console script: its first line names the interpreter
        line = Path(first).read_text().splitlines()[0]
    except (OSError, IndexError, UnicodeDecodeError):
        return None
    return line[2:].strip().split()[0] if line.startswith("#!") else None


def _probe(python: str) -> tuple[str | None, dict]:
    """(prefix, extension facts) of another interpreter, by running this file there; a failure is an "error"."""
    unknown = {"version": None, "disabled": False, "where": None, "jupyterlab_widgets": None}
    try:
        out = subprocess.run([python, str(Path(__file__)), "--probe"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as error:
        return None, {**unknown, "error": f"{python} could not be run ({error})"}
    try:
        data = json.loads(out.stdout)
        return data["prefix"], data["extension"]
    except (ValueError, KeyError, TypeError):  # not "not installed": we do not know
        last = (out.stderr.strip().splitlines() or ["no output"])[-1]
        return None, {**unknown, "error": f"asking {python} failed: {last}"}


def _torch_facts() -> dict:
    code = "import json, torch; print(json.dumps({'version': torch.__version__, 'cuda': torch.version.cuda, 'threads': torch.get_num_threads()}))"
    torch = sys.modules.get("torch")
    if torch is not None:  # the kernel's own torch, with any set_num_threads already applied
        return {"version": torch.__version__, "cuda": torch.version.cuda, "threads": torch.get_num_threads(), "error": None}
    try:
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as error:
        return {"error": str(error)}
    if out.returncode != 0:
        return {"error": (out.stderr.strip().splitlines() or ["no output"])[-1]}
    return {**json.loads(out.stdout), "error": None}


def usable_cpus() -> int:
    """Cores this process may use: its CPU affinity, capped by a cgroup CPU quota (containers, hubs)."""
    count = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    try:
        quota, period = Path("/sys/fs/cgroup/cpu.max").read_text().split()
        if quota != "max":
            count = min(count, max(1, int(int(quota) / int(period))))
    except (OSError, ValueError):
        pass
    return count


def available_mb() -> int | None:
    """Memory this process could still get: MemAvailable, capped by a cgroup limit (Binder: 1-2 GB)."""
    try:
        meminfo = Path("/proc/meminfo").read_text()
        free = int(re.search(r"MemAvailable:\s+(\d+) kB", meminfo)[1]) // 1024
    except (OSError, TypeError):
        return None
    try:
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        if limit != "max":
            used = int(Path("/sys/fs/cgroup/memory.current").read_text())
            free = min(free, (int(limit) - used) // 2**20)
    except (OSError, ValueError):
        pass
    return free


def _backend_now() -> str | None:
    matplotlib = sys.modules.get("matplotlib")
    if matplotlib is not None:
        value = dict.get(matplotlib.rcParams, "backend")  # the raw value: reading rcParams["backend"] would resolve it
        if isinstance(value, str):
            return value
    return os.environ.get("MPLBACKEND") or None


def _need_mb() -> int:
    from widgets.core.shared import benchmark_results_path  # the checkout's file, or the copy a wheel carries

    try:
        results = json.loads(benchmark_results_path().read_text())
        # the tree's resident pages (kernel and workers, shared pages once); older results have RSS only
        peaks = [nb.get("peak_resident_mb") or nb["peak_rss_mb"] for nb in results["notebooks"].values()]
        return int(max(peaks) * 1.25)
    except (OSError, ValueError, KeyError, TypeError):
        return FALLBACK_NEED_MB


def pins(path: Path = ROOT / "requirements.txt") -> dict[str, str]:
    if not path.exists():
        return {}
    return {m[1].lower().replace("-", "_"): m[2] for m in re.finditer(r"^([A-Za-z0-9_.\-]+)==(\S+)", path.read_text(), re.M)}


def declared() -> dict[str, str]:
    """name -> the version range this lab's installed package declares (pyproject.toml's dependencies)."""
    from widgets.lab.hosts import DISTRIBUTION

    try:
        requires = metadata.requires(DISTRIBUTION) or []
    except metadata.PackageNotFoundError:
        return {}
    found = (re.fullmatch(r"([A-Za-z0-9_.\-]+)\s*([<>=!][^;]*)", r.strip()) for r in requires if ";" not in r)
    return {m[1].lower().replace("-", "_"): ",".join(sorted(m[2].replace(" ", "").split(","),  # lower end first
                                                           key=lambda part: not part.startswith(">")))
            for m in found if m}


def collect(shell: bool = False) -> Facts:
    """The facts of this kernel (`shell`: of this environment, asked from a shell: `make doctor`)."""
    from widgets.lab.hosts import PURE, detect

    lab = ROOT / ".venv"
    host = "Python" if shell else detect(server_argv=server_argv())
    if host in MANAGED:  # their page has its own widget manager: nothing of ours to read
        server_prefix, extension = None, {}
    elif server := server_python():
        server_prefix, extension = _probe(server)
    else:  # from a shell: JupyterLab would be the lab's (make lab), else this environment's
        server_prefix = None
        extension = _probe(str(lab / "bin" / "python"))[1] if (lab / "bin" / "python").exists() else extension_facts()
    ranges = declared()
    return Facts(
        kernel_prefix=sys.prefix, kernel_python=sys.executable,
        lab_prefix=str(lab) if (lab / "pyvenv.cfg").exists() else None, server_prefix=server_prefix,
        versions={name: _version(name) for name in {*NEEDED, *pins(), *PURE, *ranges}}, pins=pins(),
        extension=extension, torch=_torch_facts(), usable_cpus=usable_cpus(), backend=_backend_now(),
        available_mb=available_mb(), need_mb=_need_mb(), host=host, declared=ranges,
    )


def doctor(verbose: bool = False, shell: bool = False) -> Report:
    """Check this kernel's environment; the report names the host and shows "all good" or each problem with its fix."""
    facts = collect(shell)
    return Report(diagnose(facts), facts, verbose)


def main(argv: list[str]) -> int:
    if argv[:1] == ["--probe"]:
        print(json.dumps({"prefix": sys.prefix, "extension": extension_facts()}))
        return 0
    report = doctor(verbose="--verbose" in argv, shell=True)
    print(report)
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
