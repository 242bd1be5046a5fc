"""`make present`: the projector view (Voila on present/explorer.ipynb), safe to leave running in a room.

    LAB_PRESET=forgot-to-divide python present/serve.py    # what `make present PRESET=...` runs

- A preset's name reaches this script as an environment variable, never through a shell; it is
  checked here (widgets.lab.presets) before Voila starts, and a bad one stops here with the reason.
  Any other setting goes in the page's address (`&accumulation_steps=8&mistake=loss_not_divided`),
  read as data by the page: nothing in it is ever run.
- The page needs a token: the URL printed below carries it. Without it Voila answers 403 and
  starts no kernel (a crawler, an `<img src>` on another page, a stray curl).
- Each page view starts a kernel (~370 MB). One that no page is connected to (a GET that ran no
  JavaScript, a closed tab) is shut down after --cull-idle-s seconds idle (default 30), checked
  every --cull-interval-s (default 5); a projector tab stays connected and is never culled.
  At most --max-kernels run at once (default 3, hub/kernel_cap.py): one more view gets a page
  that says the view is full (HTTP 503) and starts nothing.
- Voila listens on 127.0.0.1 only, in its own session: Ctrl+C, SIGTERM or SIGHUP (the terminal
  closed) reach this script, which stops Voila, and Voila its kernels.
"""
from __future__ import annotations

import argparse
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGE = "present/explorer.ipynb"


def checked_settings(env: dict) -> str:
    """What the page will show for $LAB_PRESET; SystemExit saying why if the name is not a preset's."""
    from widgets.lab.presets import preset

    name = env.get("LAB_PRESET", "").strip()
    if not name:
        return "the healthy default"
    try:
        preset(name)
    except ValueError as error:
        raise SystemExit(f"make present: {error}\nNothing was started.") from None
    return f"the preset {name}"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def voila_command(port: int, cull_idle_s: int, cull_interval_s: int) -> list[str]:
    """Voila's arguments: loopback only, a token (from $JUPYTER_TOKEN, not the command line, which
    every local user can read), the cull of kernels no page is connected to, and the kernel cap
    (its number from $LAB_MAX_KERNELS)."""
    return [
        sys.executable, "-m", "voila", PAGE, "--no-browser", f"--port={port}", "--Voila.ip=127.0.0.1",
        "--Voila.auto_token=True",  # the identity provider then takes $JUPYTER_TOKEN
        f"--MappingKernelManager.cull_idle_timeout={cull_idle_s}",
        f"--MappingKernelManager.cull_interval={cull_interval_s}",
        "--MappingKernelManager.cull_connected=False",  # the projector's own tab is connected: kept
        "--MappingKernelManager.cull_busy=False",
        "--VoilaConfiguration.multi_kernel_manager_class=hub.kernel_cap.ProjectorKernelManager",
    ]


def answers(url: str) -> bool:
    """Voila's static files answer without starting a kernel (the page itself would start one)."""
    try:
        with urllib.request.urlopen(url, timeout=3):
            return True
    except urllib.error.HTTPError:
        return True  # it answered
    except OSError:
        return False


def _stop_on(signum, frame):
    raise SystemExit(128 + signum)  # unwinds to the finally below, which stops Voila


def serve(cull_idle_s: int, cull_interval_s: int, max_kernels: int, ready_timeout_s: float = 120) -> int:
    what = checked_settings(os.environ)
    port, token = free_port(), secrets.token_urlsafe(24)
    # the checkout on Voila's path: it imports the kernel cap as hub.kernel_cap
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    env = {**os.environ, "JUPYTER_TOKEN": token, "LAB_MAX_KERNELS": str(max_kernels), "PYTHONPATH": path}
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, _stop_on)
    process = subprocess.Popen(voila_command(port, cull_idle_s, cull_interval_s), cwd=ROOT, env=env,
                               start_new_session=True)
    try:
        deadline = time.monotonic() + ready_timeout_s
        while not answers(f"http://127.0.0.1:{port}/voila/static/"):
            if process.poll() is not None:
                return process.returncode
            if time.monotonic() > deadline:
                print(f"Voila did not answer within {ready_timeout_s:g} s; see its log above.", file=sys.stderr)
                return 1
            time.sleep(0.5)
        url = f"http://127.0.0.1:{port}/?token={token}"
        print("\n".join(["", "=" * 78, f"The projector view, showing {what}. Open (the token is the key):",
                         f"    {url}", "Presets: add &preset=NAME; settings: &accumulation_steps=8&mistake=loss_not_divided.",
                         "Stop it: Ctrl+C in this terminal.", "=" * 78, ""]), flush=True)
        return process.wait()
    except KeyboardInterrupt:
        print("\nStopping the projector view ...", flush=True)
        return 0
    finally:
        if process.poll() is None:
            process.terminate()  # Voila shuts its kernels down first
            try:
                process.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cull-idle-s", type=int, default=30, help="shut down a kernel no page uses after this long")
    parser.add_argument("--cull-interval-s", type=int, default=5, help="how often idle kernels are looked for")
    parser.add_argument("--max-kernels", type=int, default=3, help="page views (kernels) at once; one more gets a page")
    args = parser.parse_args(argv)
    for name in ("cull_idle_s", "cull_interval_s"):
        if not 1 <= getattr(args, name) <= 3600:
            parser.error(f"--{name.replace('_', '-')} must be between 1 and 3600 seconds, got {getattr(args, name)}")
    if not 1 <= args.max_kernels <= 20:
        parser.error(f"--max-kernels must be between 1 and 20, got {args.max_kernels}")
    return serve(args.cull_idle_s, args.cull_interval_s, args.max_kernels)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
