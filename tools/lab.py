"""`make lab`: start JupyterLab on the start-here notebook, or point at the one already running.

    python tools/lab.py [--allow-root]     # start (or find) this checkout's lab, print its URL
    python tools/lab.py --stop             # stop this checkout's lab
    python tools/lab.py --configure        # only switch off the news pop-up (Binder's postBuild)

Run with the lab's Python. The news pop-up would cover the notebook's readouts. `--stop` stops only a
process that is this checkout's JupyterLab (its command line and folder say so), whatever a runtime file names.
"""
from __future__ import annotations

import argparse
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
START_HERE = "notebooks/00_start_here.ipynb"
# The lab's own settings, applied over the defaults for this environment only.
OVERRIDES = {"@jupyterlab/apputils-extension:notification": {"fetchNews": "false", "checkForUpdates": False}}


def configure(prefix: Path = Path(sys.prefix)) -> Path:
    """Merge the lab's settings into the overrides of the JupyterLab under `prefix`; a broken file is kept aside."""
    path = prefix / "share" / "jupyter" / "lab" / "settings" / "overrides.json"
    current = _read_json(path) if path.exists() else {}
    if not isinstance(current, dict):
        kept = path.with_name(path.name + ".broken")
        path.replace(kept)
        print(f"{path} was not a JSON object of settings: kept as {kept.name}, written again", file=sys.stderr)
        current = {}
    for plugin, values in OVERRIDES.items():
        if not isinstance(current.get(plugin), dict):
            current[plugin] = {}
        current[plugin].update(values)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(current, indent=2) + "\n")
    return path


def _read_json(path: Path) -> object:
    """The file's JSON, or None where it cannot be read or parsed."""
    try:
        return json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, ValueError):
        return None


def running_servers() -> list[dict]:
    """Jupyter servers started from this checkout that are alive and answer (their runtime files)."""
    from jupyter_core.paths import jupyter_runtime_dir

    found = []
    for info_file in sorted(Path(jupyter_runtime_dir()).glob("jpserver-*.json")):
        info = _read_json(info_file)
        if not _well_formed(info) or Path(info["root_dir"]).resolve() != ROOT or not _answers(info):
            continue  # unreadable, half-written, another checkout's, or a server that is gone
        found.append(info)
    return found


def _well_formed(info: object) -> bool:
    """A runtime file with what this script reads: a root folder, an http URL, a pid, a token."""
    return (isinstance(info, dict) and isinstance(info.get("root_dir"), str) and isinstance(info.get("url"), str)
            and info["url"].startswith(("http://", "https://")) and type(info.get("pid")) is int and info["pid"] > 1
            and isinstance(info.get("token", ""), str))


def is_this_lab(pid: int) -> bool:
    """Whether process `pid` is a JupyterLab started from this checkout: its command line runs
    jupyterlab (or jupyter-lab) and its working folder is the checkout."""
    try:
        args = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
        cwd = Path(os.readlink(f"/proc/{pid}/cwd")).resolve()
    except OSError:
        return False
    names = [Path(a).name for a in args]
    runs_lab = ("-m" in args and "jupyterlab" in args) or "jupyter-lab" in names or (
        "jupyter" in names and "lab" in args)
    return runs_lab and cwd == ROOT


def _answers(info: dict) -> bool:
    request = urllib.request.Request(f"{info['url'].rstrip('/')}/api/status")
    request.add_header("Authorization", f"token {info.get('token', '')}")
    try:
        with urllib.request.urlopen(request, timeout=3):
            return True
    except OSError:
        return False


def notebook_url(info: dict) -> str:
    token = f"?token={info['token']}" if info.get("token") else ""
    return f"{info['url'].rstrip('/')}/lab/tree/{START_HERE}{token}"


def free_port(first: int = 8888, tries: int = 50) -> int:
    for port in range(first, first + tries):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise SystemExit(f"no free port between {first} and {first + tries - 1}")


def banner(url: str, started_here: bool) -> str:
    how_to_stop = ("Stop it: Ctrl+C in this terminal (or `make stop` from another one)." if started_here
                   else "It runs in another terminal: stop it there with Ctrl+C, or here with `make stop`.")
    head = "The lab is running." if started_here else "This checkout's lab is already running (not starting a second one)."
    return "\n".join(["", "=" * 78, head, "Open the start-here notebook:", f"    {url}", how_to_stop, "=" * 78, ""])


def _stop_on(signum, frame):
    raise SystemExit(128 + signum)  # unwinds to start()'s finally, which stops the server


def start(extra: list[str]) -> int:
    port, token = free_port(), secrets.token_hex(24)
    command = [
        sys.executable, "-m", "jupyterlab", START_HERE,
        "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}", "--ServerApp.port_retries=0",
        f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={ROOT}",
        "--LabApp.news_url=None", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        *extra,
    ]
    # Its own session: Ctrl+C reaches this script only, which then shuts the server down cleanly
    # (no "Shutdown this Jupyter server (y/[n])?" question half-hidden in the log).
    for signum in (signal.SIGTERM, getattr(signal, "SIGHUP", None)):  # `kill`, a closed terminal (not on Windows)
        if signum is not None:
            signal.signal(signum, _stop_on)
    process = subprocess.Popen(command, cwd=ROOT, start_new_session=True)
    info = {"url": f"http://127.0.0.1:{port}/", "token": token}
    try:
        deadline = time.monotonic() + 120
        while not _answers(info):
            if process.poll() is not None:
                return process.returncode
            if time.monotonic() > deadline:
                print("JupyterLab did not answer within 120 s; see its log above.", file=sys.stderr)
                break
            time.sleep(0.5)
        else:
            print(banner(notebook_url(info), started_here=True), flush=True)
        return process.wait()
    except KeyboardInterrupt:
        print("\nStopping the lab ...", flush=True)
        return 0
    finally:
        if process.poll() is None:
            os.kill(process.pid, signal.SIGTERM)  # the server shuts its kernels down first
            try:
                process.wait(20)
            except subprocess.TimeoutExpired:
                os.kill(process.pid, signal.SIGKILL)


def stop() -> int:
    stopped = 0
    for info in running_servers():
        # A stale runtime file may name a pid reused by anything, and its URL may now be another
        # server's: stop only a process that is this checkout's JupyterLab.
        if not is_this_lab(info["pid"]):
            print(f"not stopping pid {info['pid']} (named by a stale runtime file for {info['url']}): "
                  "it is not this checkout's JupyterLab")
            continue
        os.kill(info["pid"], signal.SIGTERM)
        stopped += 1
        print(f"stopped the lab at {info['url']} (pid {info['pid']})")
    if not stopped:
        print("no lab of this checkout is running")
    return 0


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stop", action="store_true", help="stop this checkout's lab")
    parser.add_argument("--configure", action="store_true", help="only write the settings overrides")
    args, extra = parser.parse_known_args(argv)
    if args.stop:
        return stop()
    print(f"JupyterLab settings for this environment: {configure()}")
    if args.configure:
        return 0
    servers = running_servers()
    if servers:
        print(banner(notebook_url(servers[0]), started_here=False))
        return 0
    return start(extra)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
