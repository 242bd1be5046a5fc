"""tools/lab.py (`make lab`, `make stop`): settings merged, bad files skipped, only its own server stopped.

- overrides.json is merged; a malformed one is kept aside, not a traceback;
- malformed or half-written runtime files are skipped;
- `--stop` does not kill a process a stale runtime file names unless it is this checkout's JupyterLab,
  even when something at that URL answers 2xx;
- SIGTERM and SIGHUP (a closed terminal) stop JupyterLab instead of orphaning it (marked slow).
"""
from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

ROOT = Path(__file__).resolve().parents[1]
SPEC = importlib.util.spec_from_file_location("lab_tool", ROOT / "tools" / "lab.py")
lab = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(lab)


def _overrides(prefix: Path) -> Path:
    return prefix / "share" / "jupyter" / "lab" / "settings" / "overrides.json"


def test_configure_merges_with_what_is_there(tmp_path):
    path = _overrides(tmp_path)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"other:plugin": {"x": 1}}))
    assert lab.configure(tmp_path) == path
    written = json.loads(path.read_text())
    assert written["other:plugin"] == {"x": 1}
    assert written["@jupyterlab/apputils-extension:notification"]["fetchNews"] == "false"


@pytest.mark.parametrize("text", ["{not json", "[1, 2]", '{"@jupyterlab/apputils-extension:notification": 3}', "\xff"])
def test_a_malformed_overrides_file_is_kept_aside_not_a_traceback(tmp_path, text):
    path = _overrides(tmp_path)
    path.parent.mkdir(parents=True)
    path.write_text(text, encoding="latin-1")
    lab.configure(tmp_path)
    assert json.loads(path.read_text())["@jupyterlab/apputils-extension:notification"]["checkForUpdates"] is False
    broken = path.with_name("overrides.json.broken")
    assert not broken.exists() or broken.read_text(encoding="latin-1") == text


def test_malformed_runtime_files_are_skipped(tmp_path, monkeypatch):
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path))
    root = str(ROOT)
    for i, text in enumerate(["{", "[]", "null", '{"root_dir": 5}', json.dumps({"root_dir": root}),
                              json.dumps({"root_dir": root, "url": "http://127.0.0.1:1/", "pid": "12"}),
                              json.dumps({"root_dir": root, "url": 7, "pid": 12}),
                              json.dumps({"root_dir": root, "url": "file:///etc/passwd", "pid": 12})]):
        (tmp_path / f"jpserver-{i}.json").write_text(text)
    assert lab.running_servers() == []
    assert lab.stop() == 0


@pytest.fixture
def answering_stranger(tmp_path):
    """Not a JupyterLab: a static web server in another folder that answers 200 at /api/status."""
    (tmp_path / "site" / "api").mkdir(parents=True)
    (tmp_path / "site" / "api" / "status").write_text("{}")
    port = lab.free_port(20000)
    process = subprocess.Popen([sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"],
                               cwd=tmp_path / "site", stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        url = f"http://127.0.0.1:{port}/"
        deadline = time.monotonic() + 30
        while not lab._answers({"url": url}):
            assert time.monotonic() < deadline and process.poll() is None, "the stand-in server did not start"
            time.sleep(0.2)
        yield process, url
    finally:
        process.kill()
        process.wait()


def test_stop_leaves_alone_a_process_a_stale_runtime_file_names(tmp_path, monkeypatch, answering_stranger, capsys):
    process, url = answering_stranger
    runtime = tmp_path / "runtime"
    runtime.mkdir()
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(runtime))
    (runtime / "jpserver-1.json").write_text(json.dumps({"root_dir": str(ROOT), "url": url, "pid": process.pid,
                                                         "token": ""}))
    assert len(lab.running_servers()) == 1  # it answers 2xx: the old --stop killed it on that alone
    lab.stop()
    time.sleep(0.5)
    assert process.poll() is None, "--stop killed a process that is not this checkout's JupyterLab"
    assert "not this checkout's JupyterLab" in capsys.readouterr().out


def test_is_this_lab_reads_the_command_line_and_the_folder(tmp_path):
    lookalike = [sys.executable, "-c", "import time; time.sleep(60)", "-m", "jupyterlab"]
    here, elsewhere = (subprocess.Popen(lookalike, cwd=cwd) for cwd in (ROOT, tmp_path))
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], cwd=ROOT)
    try:
        time.sleep(0.3)
        assert lab.is_this_lab(here.pid)
        assert not lab.is_this_lab(elsewhere.pid)  # another checkout's lab
        assert not lab.is_this_lab(other.pid)  # a process of this checkout that is not a lab
        assert not lab.is_this_lab(2**22 + 1)  # no such process
    finally:
        for p in (here, elsewhere, other):
            p.kill()
            p.wait()


DRIVER = """
import importlib.util, sys
spec = importlib.util.spec_from_file_location("lab_tool", sys.argv[1])
lab = importlib.util.module_from_spec(spec)
spec.loader.exec_module(lab)
sys.exit(lab.start(sys.argv[2:]))
"""


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_a_signal_stops_jupyterlab_too(tmp_path, signum):
    extra = ["--allow-root"] if os.geteuid() == 0 else []
    env = {**os.environ, "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime")}
    driver = subprocess.Popen([sys.executable, "-c", DRIVER, str(ROOT / "tools" / "lab.py"), *extra], cwd=ROOT,
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    tree: list[psutil.Process] = []
    try:
        deadline, seen = time.monotonic() + 180, []
        while not any("The lab is running." in line for line in seen):
            assert time.monotonic() < deadline and driver.poll() is None, "".join(seen)[-2000:]
            seen.append(driver.stdout.readline())
        tree = psutil.Process(driver.pid).children(recursive=True)
        assert any(lab.is_this_lab(p.pid) for p in tree)
        driver.send_signal(signum)
        driver.wait(40)
        gone, alive = psutil.wait_procs(tree, timeout=10)
        assert alive == [], f"JupyterLab outlived lab.py after {signum.name}: {alive}"
    finally:
        if driver.poll() is None:
            tree += psutil.Process(driver.pid).children(recursive=True)
            driver.kill()
            driver.wait()
        for p in tree:
            try:
                p.kill()
            except psutil.NoSuchProcess:
                pass
        driver.stdout.close()
