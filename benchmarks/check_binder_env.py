"""Rebuild the Binder environment in a fresh venv (no Docker) and re-run the notebooks in it with nbval.

    python benchmarks/check_binder_env.py                         # every notebook
    python benchmarks/check_binder_env.py notebooks/00_start_here.ipynb

PyTorch's CPU index is unreachable here: `torch==...+cpu` comes from a local wheel (pip's find-links).
Writes benchmarks/results/binder_env.json, which tests/test_binder.py reads.
"""
from __future__ import annotations

import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULT = ROOT / "benchmarks" / "results" / "binder_env.json"
TEST_TOOLS = ("pytest", "nbval")  # added to the venv only to compare outputs; pinned as in requirements-test.txt


def pins(text: str) -> dict[str, str]:
    """`name==version` lines (of a requirements file or `pip freeze`), names normalised."""
    return {m[1].lower().replace("_", "-"): m[2] for m in re.finditer(r"^\s*([A-Za-z0-9_.\-]+)\s*==\s*(\S+)", text, re.M)}


def step(log: dict, name: str, command: list[str], **kwargs) -> subprocess.CompletedProcess:
    """Run one command, record its time and outcome under `name`, print a line."""
    start = time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True, **kwargs)
    seconds = round(time.perf_counter() - start, 1)
    log[name] = {"seconds": seconds, "ok": result.returncode == 0, "command": " ".join(map(str, command))}
    if result.returncode != 0:
        log[name]["output_tail"] = (result.stdout + result.stderr)[-3000:]
    print(f"{'ok  ' if result.returncode == 0 else 'FAIL'} {seconds:6.1f} s  {name}", flush=True)
    return result


def copy_repository(target: Path) -> None:
    """The files Binder would see: tracked ones plus new, not-ignored ones (work in progress)."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=ROOT, capture_output=True, text=True, check=True,
    ).stdout.split("\0")
    for name in filter(None, listed):
        source = ROOT / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)


def main(notebooks: list[str]) -> bool:
    work = Path(tempfile.mkdtemp(prefix="binder-env-"))
    repo, venv = work / "repo", work / "venv"
    copy_repository(repo)
    requirements = work / "requirements.txt"
    kept = [ln for ln in (repo / "binder/requirements.txt").read_text().splitlines()
            if not ln.strip().startswith(("--extra-index-url", "--index-url"))]
    requirements.write_text("\n".join(kept) + "\n")
    tools = pins((ROOT / "requirements.txt").read_text() + "\n" + (ROOT / "requirements-test.txt").read_text())
    bin_ = venv / "bin"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env.update(PATH=f"{bin_}:{env.get('PATH', '/usr/bin:/bin')}", VIRTUAL_ENV=str(venv))
    log: dict = {}
    ok = (
        step(log, "venv", [sys.executable, "-m", "venv", str(venv)]).returncode == 0
        and step(log, "pip install -r binder/requirements.txt (CPU index dropped)",
                 [bin_ / "pip", "install", "--quiet", "-r", requirements], env=env).returncode == 0
        and step(log, "binder/postBuild", ["bash", "binder/postBuild"], cwd=repo, env=env).returncode == 0
    )
    if ok:
        imported = step(log, "import widgets", [bin_ / "python", "-c",
                        "import widgets, widgets.lessons.beginner_2.controls; print(widgets.__file__)"], cwd=work, env=env)
        ok = imported.returncode == 0 and str(repo) in imported.stdout
        extensions = step(log, "jupyter labextension list", [bin_ / "jupyter", "labextension", "list"], env=env)
        ok = ok and re.search(r"@jupyter-widgets/jupyterlab-manager.*enabled.*OK", extensions.stdout + extensions.stderr)
        ok = bool(ok) and step(log, "pip install pytest nbval (to compare outputs)",
                               [bin_ / "pip", "install", "--quiet", *(f"{t}=={tools[t]}" for t in TEST_TOOLS)],
                               env=env).returncode == 0
    results = {}
    if ok:
        targets = notebooks or sorted(p.relative_to(repo).as_posix() for p in (repo / "notebooks").glob("*.ipynb"))
        for notebook in targets:
            run = step(log, f"nbval {notebook}", [bin_ / "python", "-m", "pytest", "-q", notebook], cwd=repo, env=env)
            results[notebook] = log[f"nbval {notebook}"]["seconds"] if run.returncode == 0 else "FAILED"
        ok = bool(results) and all(v != "FAILED" for v in results.values())
    wanted = pins((repo / "binder/requirements.txt").read_text())
    installed = pins(subprocess.run([bin_ / "python", "-m", "pip", "freeze"], capture_output=True, text=True).stdout)
    record = {
        "command": " ".join(["python benchmarks/check_binder_env.py", *notebooks]),
        "passed": ok,
        "binder_requirements": (repo / "binder/requirements.txt").read_text(),
        "installed": {name: installed.get(name) for name in wanted},
        "python": platform.python_version(),
        "binder_runtime": (repo / "binder/runtime.txt").read_text().strip(),  # Binder's Python; the venv above uses this machine's
        "notebooks_seconds": results,
        "steps": log,
        "machine": f"{platform.machine()}, {platform.system()}",
        "date": time.strftime("%Y-%m-%d %H:%M"),
    }
    RESULT.parent.mkdir(exist_ok=True)
    RESULT.write_text(json.dumps(record, indent=2) + "\n")
    shutil.rmtree(work, ignore_errors=True)
    print(f"{'PASSED' if ok else 'FAILED'}; written to {RESULT.relative_to(ROOT)}")
    return ok


if __name__ == "__main__":
    sys.exit(0 if main(sys.argv[1:]) else 1)
