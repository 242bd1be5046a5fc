"""`make lab`: start JupyterLab on the start-here notebook, or point at the one already running.

    python tools/lab.py [--allow-root]     # start (or find) this checkout's lab, print its URL
    python tools/lab.py --stop             # stop this checkout's lab
    python tools/lab.py --configure        # only switch off the news pop-up (Binder's postBuild)

Run with the lab's Python (.venv/bin/python). It switches off JupyterLab's "Jupyter news?" pop-up
for this environment only (the overrides file of the lab's own JupyterLab: it would cover the
notebook's readouts), finds a server of this checkout from the runtime files Jupyter writes (and
checks that it answers), else starts one on a free port with a fresh token, waits until it answers,
and prints the direct URL of the start-here notebook and how to stop it. Ctrl+C stops the server.
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
    """Write (merge) the settings overrides of the JupyterLab installed under `prefix`."""
    path = prefix / "share" / "jupyter" / "lab" / "settings" / "overrides.json"
    current = json.loads(path.read_text()) if path.exists() else {}
    for plugin, values in OVERRIDES.items():
        current.setdefault(plugin, {}).update(values)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(current, indent=2) + "\n")
    return path


def running_servers() -> list[dict]:
    """Jupyter servers started from this checkout that are alive and answer (their runtime files)."""
    from jupyter_core.paths import jupyter_runtime_dir

    found = []
    for info_file in sorted(Path(jupyter_runtime_dir()).glob("jpserver-*.json")):
        try:
            info = json.loads(info_file.read_text())
        except (OSError, ValueError):
            continue
        if Path(info.get("root_dir", "")).resolve() != ROOT or not _answers(info):
            continue
        found.append(info)
    return found


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
    servers = running_servers()
    for info in servers:
        os.kill(info["pid"], signal.SIGTERM)
        print(f"stopped the lab at {info['url']} (pid {info['pid']})")
    if not servers:
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
