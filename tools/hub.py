"""Start, find and stop the room's JupyterHub (`make hub`, `make hub-stop`; instructor/hub.md).

    python tools/hub.py start --learners ada,ben,cy [--ip 127.0.0.1] [--port 8000]
    python tools/hub.py status          # the running hub's URL, if any
    python tools/hub.py password room   # a new room password (asked for; or read from stdin)
    python tools/hub.py stop [--forget] # stop everything it started; --forget also deletes the
                                        # system users it created and the state folder

Runs as root (each learner is a system user). The state folder ($LAB_HUB_STATE, else
/var/lib/gradient-accumulation-lab-hub; mode 700, outside the checkout) holds room.json, the
hub's database and cookie secret (mode 600), its log and hub.json (what is running).
"""
from __future__ import annotations

import argparse
import getpass
import json
import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HUB = ROOT / "hub"
sys.path.insert(0, str(ROOT))  # run as a script: the checkout's hub/ folder
from hub.room import check_name, free_port, hash_password, load_room, parse_bytes, room_file, save_room  # noqa: E402

DEFAULT_STATE = Path("/var/lib/gradient-accumulation-lab-hub")
PROXY = HUB / "node_modules" / ".bin" / "configurable-http-proxy"
VENV_BIN = Path(sys.executable).parent


class HubError(SystemExit):
    """A problem the instructor can fix; the message says how."""


def state_dir(named: str | None) -> Path:
    return Path(named or os.environ.get("LAB_HUB_STATE") or DEFAULT_STATE)


def running(state: Path) -> dict | None:
    """The hub this state folder started, if its process is still alive (else None)."""
    try:
        info = json.loads((state / "hub.json").read_text())
        cmdline = Path(f"/proc/{info['pid']}/cmdline").read_bytes()
    except (OSError, ValueError, KeyError):
        return None
    return info if b"jupyterhub" in cmdline else None


def _create_users(room: dict) -> None:
    """A system user per learner (and the instructor), home mode 700; never takes over an existing one."""
    for name in [*room["learners"], room["instructor"]]:
        try:
            pwd.getpwnam(name)
            if name not in room["created_users"]:
                raise HubError(f"{name!r} is already a user of this machine, not one the room created: "
                               "choose another learner name (the room never logs in as an existing account)")
        except KeyError:
            subprocess.run(["useradd", "--create-home", "--shell", "/bin/bash", "--user-group", name], check=True)
            room["created_users"].append(name)
        os.chmod(pwd.getpwnam(name).pw_dir, 0o700)  # no learner reads another's home


def _check_readable(name: str) -> None:
    """The lab's environment and notebooks must be readable by a learner (not under a mode-700 home)."""
    user = pwd.getpwnam(name)
    probe = subprocess.run(
        [sys.executable, "-c", f"import jupyterhub, widgets.lab.progress, os; os.listdir({str(ROOT / 'notebooks')!r})"],
        user=user.pw_uid, group=user.pw_gid, extra_groups=[], cwd="/", capture_output=True, text=True,
        env={"HOME": user.pw_dir, "PATH": "/usr/bin:/bin"})
    if probe.returncode:
        raise HubError(f"A learner cannot read the lab's environment at {VENV_BIN.parent} or its notebooks at "
                       f"{ROOT / 'notebooks'} ({probe.stderr.strip().splitlines()[-1:]}).\nAn environment or checkout under a "
                       "mode-700 home (pyenv's Python under /root, a clone in ~) is unreachable to them: make hub builds "
                       "its environment at HUB_VENV from HUB_PYTHON (/opt, /usr/bin/python3); clone the lab under /srv or /opt.")


def _password(env_name: str) -> tuple[str, bool]:
    """The password from $env_name, else a new random one (True: print it once)."""
    given = os.environ.get(env_name)
    return (given, False) if given else (secrets.token_urlsafe(9), True)


def _new_room(state: Path, learners: list[str], instructor: str, mem_limit: str, idle_s: int) -> list[str]:
    room_password, show_room = _password("LAB_ROOM_PASSWORD")
    instructor_password, show_instructor = _password("LAB_INSTRUCTOR_PASSWORD")
    save_room(state, {"learners": learners, "instructor": instructor, "mem_limit": mem_limit, "idle_timeout_s": idle_s,
                      "room_password": hash_password(room_password),
                      "instructor_password": hash_password(instructor_password), "created_users": []})
    said = []
    if show_room:
        said.append(f"room password (give it to the learners): {room_password}")
    if show_instructor:
        said.append(f"instructor {instructor!r} password (keep it): {instructor_password}")
    return said


def start(state: Path, ip: str, port: int, learners: list[str] | None, instructor: str, mem_limit: str,
          idle_s: int, timeout: float = 90) -> dict:
    found = running(state)
    if found:
        print(f"The room's hub is already running: {found['url']} (pid {found['pid']}; make hub-stop ends it)")
        return found
    if os.geteuid() != 0:
        raise HubError("make hub runs as root: each learner is a system user, and only root can start their servers")
    if not PROXY.exists():
        if not shutil.which("npm"):
            raise HubError("The proxy needs Node.js and npm: apt-get install -y nodejs npm (make hub does it as root)")
        subprocess.run(["npm", "ci", "--no-audit", "--no-fund", "--prefix", str(HUB)], check=True)
    state.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(state, 0o700)
    said = []
    if not room_file(state).exists():
        if not learners:
            learners = [f"learner{i:02d}" for i in range(1, 11)]
            print("No learners named (make hub LEARNERS=ada,ben,cy): the room is learner01 ... learner10")
        said = _new_room(state, learners, instructor, mem_limit, idle_s)
    room = load_room(state)
    if learners and learners != room["learners"]:
        room["learners"] = learners
    try:
        _create_users(room)
    finally:
        save_room(state, room)
    _check_readable(room["learners"][0])
    ports = {"LAB_HUB_HUB_PORT": free_port(), "LAB_HUB_API_PORT": free_port(), "LAB_HUB_ROOM_PORT": free_port()}
    env = {**os.environ, "LAB_HUB_STATE": str(state), "LAB_HUB_IP": ip, "LAB_HUB_PORT": str(port),
           "PATH": f"{VENV_BIN}:{os.environ.get('PATH', '/usr/bin:/bin')}", **{k: str(v) for k, v in ports.items()}}
    for name in ("LAB_ROOM_PASSWORD", "LAB_INSTRUCTOR_PASSWORD", "LAB_PROGRESS_FILE"):
        env.pop(name, None)
    with os.fdopen(os.open(state / "hub.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600), "ab") as log:
        hub = subprocess.Popen([str(VENV_BIN / "jupyterhub"), "-f", str(HUB / "jupyterhub_config.py")], cwd=state,
                               env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                               start_new_session=True, umask=0o077)  # database and secret: mode 600
    url = f"http://{'127.0.0.1' if ip == '0.0.0.0' else ip}:{port}"
    info = {"pid": hub.pid, "url": url, "ip": ip, "port": port, **ports}
    deadline = time.monotonic() + timeout
    while True:
        if hub.poll() is not None:
            raise HubError(f"JupyterHub exited with {hub.returncode}; its log ({state / 'hub.log'}) ends:\n"
                           + (state / "hub.log").read_text(errors="replace")[-3000:])
        try:
            with urllib.request.urlopen(f"{url}/hub/api/", timeout=5):
                break
        except OSError:
            if time.monotonic() > deadline:
                stop(state)
                raise HubError(f"JupyterHub did not answer at {url} in {timeout:.0f} s; see {state / 'hub.log'}") from None
            time.sleep(0.5)
    fd = os.open(state / "hub.json", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(info, f)
    print(f"The room's hub: {url}/  (learners log in with their name and the room password)")
    print(f"The room view (instructor only): {url}/services/room/")
    for line in said:
        print(line)
    return info


def _room_uids(state: Path) -> set[int]:
    try:
        names = load_room(state)["created_users"]
    except (OSError, ValueError, KeyError):
        return set()
    uids = set()
    for name in names:
        try:
            uids.add(pwd.getpwnam(name).pw_uid)
        except KeyError:
            pass
    return uids


def _room_processes(state: Path) -> list[int]:
    """PIDs of what the room runs: every process of a learner, and every process carrying this state
    folder in its environment: the hub, the proxy and the services (each in a session of its own,
    so neither a process group nor, once the hub is gone, a parent finds them all)."""
    uids, pids = _room_uids(state), []
    marker = f"LAB_HUB_STATE={state}".encode() + b"\0"
    mine = {os.getpid(), os.getppid()}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) in mine:
            continue
        try:
            if entry.stat().st_uid in uids or marker in b"\0" + (entry / "environ").read_bytes():
                pids.append(int(entry.name))
        except OSError:
            pass
    return pids


def stop(state: Path, forget: bool = False, grace: float = 30) -> list[int]:
    """Stop the hub (which stops the servers and the proxy), then anything of the room left; the PIDs ended."""
    info = None
    try:
        info = json.loads((state / "hub.json").read_text())
    except (OSError, ValueError):
        pass
    hub_pid = info["pid"] if info and running(state) else None
    if hub_pid:
        os.kill(hub_pid, signal.SIGTERM)  # JupyterHub stops every server and its proxy (cleanup_servers)
        deadline = time.monotonic() + grace
        while Path(f"/proc/{hub_pid}").exists() and time.monotonic() < deadline:
            _reap(hub_pid)
            time.sleep(0.2)
    left = _room_processes(state)
    for pid in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    for pid in left:
        _reap(pid)
    (state / "hub.json").unlink(missing_ok=True)
    if forget and room_file(state).exists():
        for name in load_room(state)["created_users"]:
            subprocess.run(["userdel", "--remove", name], check=False, stderr=subprocess.DEVNULL)
        shutil.rmtree(state, ignore_errors=True)
    print("The room's hub is stopped" + (f" ({len(left)} leftover processes ended)" if left else "")
          + ("; its users and state are deleted" if forget else ""))
    return left


def _reap(pid: int) -> None:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def set_password(state: Path, which: str) -> None:
    room = load_room(state)
    new = getpass.getpass(f"new {which} password: ") if sys.stdin.isatty() else sys.stdin.readline().rstrip("\n")
    room[f"{which}_password"] = hash_password(new)
    save_room(state, room)
    print(f"The {which} password is changed (the next login uses it).")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--state", help="the state folder (default $LAB_HUB_STATE or /var/lib/gradient-accumulation-lab-hub)")
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser("start")
    up.add_argument("--ip", default="127.0.0.1", help="the address the learners reach (default 127.0.0.1)")
    up.add_argument("--port", type=int, default=8000)
    up.add_argument("--learners", help="comma-separated names (first start; default learner01 ... learner10)")
    up.add_argument("--instructor", default="instructor")
    up.add_argument("--mem-limit", default="3G", help="per-process address-space limit of a learner (K, M, G)")
    up.add_argument("--idle-timeout", type=int, default=3600, help="seconds before the culler stops an idle server")
    sub.add_parser("status")
    down = sub.add_parser("stop")
    down.add_argument("--forget", action="store_true", help="also delete the room's system users and its state")
    password = sub.add_parser("password")
    password.add_argument("which", choices=["room", "instructor"])
    args = parser.parse_args(argv)
    state = state_dir(args.state)
    if args.command == "start":
        if not 1 <= args.port <= 65535:
            raise HubError(f"--port must be in 1..65535, got {args.port}")
        try:
            socket.inet_aton(args.ip)
        except OSError:
            raise HubError(f"--ip must be an IPv4 address of this machine, got {args.ip!r}") from None
        if args.idle_timeout < 60:
            raise HubError(f"--idle-timeout must be at least 60 s, got {args.idle_timeout}")
        try:
            parse_bytes(args.mem_limit)
            learners = [check_name(n.strip()) for n in args.learners.split(",") if n.strip()] if args.learners else None
            check_name(args.instructor, "instructor name")
        except ValueError as error:
            raise HubError(str(error)) from None
        if learners and args.instructor in learners:
            raise HubError(f"--instructor {args.instructor!r} must not also be a learner")
        start(state, args.ip, args.port, learners, args.instructor, args.mem_limit.upper(), args.idle_timeout)
    elif args.command == "status":
        found = running(state)
        print(f"The room's hub is running: {found['url']} (pid {found['pid']})" if found else "No room hub is running.")
    elif args.command == "stop":
        stop(state, forget=args.forget)
    else:
        set_password(state, args.which)


if __name__ == "__main__":
    main()
