"""Start, find and stop the room's JupyterHub (`make hub`, `make hub-stop`; instructor/hub.md).

    python tools/hub.py start --learners ada,ben,cy [--ip 127.0.0.1] [--port 8000]
                              [--limits memory=3G,processes=512,kernels=4]
    python tools/hub.py status          # the running hub's URL, if any
    python tools/hub.py password room   # a new room password (asked for; or read from stdin)
    python tools/hub.py limits kernels=3  # new per-learner limits: each server started from now on
    python tools/hub.py stop [--forget] # stop everything it started; --forget also deletes the
                                        # system users it created and the state folder

Runs as root (each learner is a system user); every argument is checked (hub/settings.py) before
anything runs. The state folder ($LAB_HUB_STATE, mode 700, outside the checkout) holds the room.
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
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HUB = ROOT / "hub"
sys.path.insert(0, str(ROOT))  # run as a script: the checkout's hub/ folder
from hub import limits as room_limits  # noqa: E402
from hub.room import free_port, hash_password, load_room, room_file, room_limits_of, save_room  # noqa: E402
from hub.settings import check_count, check_ip, check_learners, check_name, parse_limits  # noqa: E402

DEFAULT_STATE = Path("/var/lib/gradient-accumulation-lab-hub")
PROXY = HUB / "node_modules" / ".bin" / "configurable-http-proxy"
VENV_BIN = Path(sys.executable).parent


class HubError(SystemExit):
    """A problem the instructor can fix; the message says how."""


def state_dir(named: str | None) -> Path:
    return Path(named or os.environ.get("LAB_HUB_STATE") or DEFAULT_STATE).absolute()  # the mark stop finds by


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


def _new_room(state: Path, learners: list[str], instructor: str, idle_s: int) -> list[str]:
    room_password, show_room = _password("LAB_ROOM_PASSWORD")
    instructor_password, show_instructor = _password("LAB_INSTRUCTOR_PASSWORD")
    save_room(state, {"learners": learners, "instructor": instructor, "limits": parse_limits("").text(), "idle_timeout_s": idle_s,
                      "room_password": hash_password(room_password),
                      "instructor_password": hash_password(instructor_password), "created_users": []})
    said = []
    if show_room:
        said.append(f"room password (give it to the learners): {room_password}")
    if show_instructor:
        said.append(f"instructor {instructor!r} password (keep it): {instructor_password}")
    return said


def start(state: Path, ip: str, port: int, learners: list[str] | None, instructor: str, limits: str,
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
        said = _new_room(state, learners, instructor, idle_s)
    room = load_room(state)
    if learners and learners != room["learners"]:
        room["learners"] = learners
    room["limits"] = parse_limits(limits, room_limits_of(room)).text()  # LIMITS changes only what it names
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
    print(describe_limits(room))
    for line in said:
        print(line)
    return info


def describe_limits(room: dict) -> str:
    """What each learner may hold and what enforces it on this machine (and whether it can afford them)."""
    limits, how = room_limits_of(room), room_limits.mechanisms()
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    line = (f"Each learner may hold {limits.text().replace(',', ', ')} (LIMITS=...; instructor/hub.md): "
            f"memory by {how['memory']}, processes by {how['processes']}, kernels by their server.")
    if len(room["learners"]) * limits.memory > total:
        line += (f"\nNote: {len(room['learners'])} learners x {limits.memory / 2**30:.1f} GiB is more than this machine's "
                 f"{total / 2**30:.1f} GiB: fine while they do not all peak at once; LIMITS=memory=... lowers it.")
    return line


def _room_users(state: Path) -> dict[str, int]:
    """name -> uid of the system users this room created (and that still exist)."""
    try:
        names = load_room(state)["created_users"]
    except (OSError, ValueError, KeyError):
        return {}
    users = {}
    for name in names:
        try:
            users[name] = pwd.getpwnam(name).pw_uid
        except KeyError:
            pass
    return users


def _uids_of(entry: Path) -> set[int]:
    """The real, effective and saved uids of a process (/proc/<pid>/status)."""
    for line in (entry / "status").read_text().splitlines():
        if line.startswith("Uid:"):
            return {int(u) for u in line.split()[1:4]}
    return set()


def _stat_of(entry: Path) -> tuple[str, int]:
    """The process's state letter (R, S, D, Z: a zombie, dead, waiting for its parent to read its
    status...) and its start time (with the pid, what tells it from a later process given the same pid)."""
    fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
    return fields[0], int(fields[19])


def _room_processes(state: Path, uids: set[int], groups: list[Path], seen: dict[int, int]) -> dict[int, str]:
    """pid -> state letter of what the room runs: every process of a room user (any of its uids), every
    process in a learner's cgroup, every process carrying this state folder in its environment (the hub,
    the proxy, the services, and a server the hub has forked but not yet handed to its learner), and
    any of those `seen` before (pid -> start time) that is not gone yet: a zombie's environment is empty."""
    marker = f"LAB_HUB_STATE={state}".encode() + b"\0"
    in_groups = {pid for group in groups for pid in room_limits.tasks(group)}
    mine = {os.getpid(), os.getppid()}
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) in mine:
            continue
        pid = int(entry.name)
        try:
            letter, started = _stat_of(entry)
            if (pid in in_groups or seen.get(pid) == started or _uids_of(entry) & uids
                    or marker in b"\0" + (entry / "environ").read_bytes()):
                found[pid] = letter
                seen[pid] = started
        except (OSError, ValueError, IndexError):
            pass  # gone meanwhile
    return found


def _kill_as(uid: int) -> None:
    """SIGKILL every process of `uid` at once: kill(-1) from a child that has become that user. The
    kernel signals them all in one pass under its task-list lock, so a loop that keeps forking
    cannot slip a child past it, as it can between a scan of /proc and the kills that follow it."""
    child = os.fork()
    if child == 0:
        try:
            os.setgroups([])
            os.setuid(uid)
            os.kill(-1, signal.SIGKILL)  # not the caller itself (Linux)
        except OSError:
            pass
        os._exit(0)
    os.waitpid(child, 0)


def _reap_children() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _sweep_shared_memory(uids: set[int], folders: tuple[str, ...]) -> int:
    """Delete what the room's users left in RAM-backed places (/dev/shm; with --forget also /tmp):
    it outlives their processes. Also their System V shared memory segments. How many went."""
    removed = 0
    for folder in folders:
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            try:
                if entry.stat(follow_symlinks=False).st_uid not in uids:
                    continue
                if entry.is_dir(follow_symlinks=False):
                    shutil.rmtree(entry.path)  # never follows a link planted inside
                else:
                    os.unlink(entry.path)
                removed += 1
            except OSError:
                pass
    try:
        segments = Path("/proc/sysvipc/shm").read_text().splitlines()[1:]
    except OSError:
        segments = []
    for line in segments:
        fields = line.split()
        if len(fields) > 9 and {int(fields[7]), int(fields[9])} & uids:
            removed += subprocess.run(["ipcrm", "-m", fields[1]], capture_output=True).returncode == 0
    return removed


def stop(state: Path, forget: bool = False, grace: float = 30, settle: float = 30) -> list[str]:
    """Stop the hub (which stops the servers and the proxy), then kill what is left of the room until
    nothing is, twice in a row; delete the learners' cgroups and what they left in /dev/shm. Returns
    what is still there after `settle` seconds of that (nothing, unless a process cannot be killed)."""
    info = None
    try:
        info = json.loads((state / "hub.json").read_text())
    except (OSError, ValueError):
        pass
    hub_pid = info["pid"] if info and running(state) else None
    if hub_pid:
        os.kill(hub_pid, signal.SIGTERM)  # JupyterHub stops every server and its proxy (cleanup_servers)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            try:
                if _stat_of(Path(f"/proc/{hub_pid}"))[0] == "Z":
                    break
            except (OSError, IndexError):
                break
            _reap_children()
            time.sleep(0.2)
    users = _room_users(state)
    uids = set(users.values())
    groups = [group for name in users for group in room_limits.groups_of(name)]
    ended: set[int] = set()
    found: dict[int, str] = {}
    seen: dict[int, int] = {}  # pid -> start time of what was found: followed until it is reaped
    if hub_pid:
        try:
            seen[hub_pid] = _stat_of(Path(f"/proc/{hub_pid}"))[1]
        except (OSError, IndexError):
            pass
    clean, deadline = 0, time.monotonic() + settle
    while time.monotonic() < deadline:
        found = _room_processes(state, uids, groups, seen)
        clean = 0 if found else clean + 1
        if clean == 2:  # nothing twice, 0.1 s apart: nothing is still being born either
            break
        alive = {pid for pid, letter in found.items() if letter != "Z"}  # a zombie is gone once its parent reaps it
        for uid in uids:
            _kill_as(uid)
        for pid in alive:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        ended |= alive
        _reap_children()
        time.sleep(0.1)
    left = [f"{pid} ({'a zombie' if letter == 'Z' else 'alive'})" for pid, letter in sorted(found.items())] if clean < 2 else []
    for name in users:
        left += [f"cgroup {g}" for g in room_limits.remove(name)]
    room_limits.remove_base()
    swept = _sweep_shared_memory(uids, ("/dev/shm", "/tmp", "/var/tmp") if forget else ("/dev/shm",))
    (state / "hub.json").unlink(missing_ok=True)
    if forget and room_file(state).exists():
        for name in load_room(state)["created_users"]:
            subprocess.run(["userdel", "--remove", name], check=False, stderr=subprocess.DEVNULL)
        shutil.rmtree(state, ignore_errors=True)
    done = [f"{len(ended)} processes ended"] * bool(ended) + [f"{swept} files of its users in shared memory deleted"] * bool(swept)
    print("The room's hub is stopped" + (f" ({', '.join(done)})" if done else "")
          + ("; its users and state are deleted" if forget else "")
          + (f"\nStill there after {settle:g} s: {', '.join(left)}" if left else ""))
    return left


def set_password(state: Path, which: str) -> None:
    room = load_room(state)
    new = getpass.getpass(f"new {which} password: ") if sys.stdin.isatty() else sys.stdin.readline().rstrip("\n")
    room[f"{which}_password"] = hash_password(new)
    save_room(state, room)
    print(f"The {which} password is changed (the next login uses it).")


def set_limits(state: Path, text: str) -> None:
    room = load_room(state)
    room["limits"] = parse_limits(text, room_limits_of(room)).text()
    save_room(state, room)
    print(f"The room's limits are now {room['limits']}: each learner's server started from now on has them "
          "(a running one keeps its own until it stops).")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--state", help="the state folder (default $LAB_HUB_STATE or /var/lib/gradient-accumulation-lab-hub)")
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser("start")
    up.add_argument("--ip", default="127.0.0.1", help="the address the learners reach (default 127.0.0.1)")
    up.add_argument("--port", default="8000")
    up.add_argument("--learners", default="", help="comma-separated names (first start; default learner01 ... learner10)")
    up.add_argument("--instructor", default="instructor")
    up.add_argument("--limits", default="", help="per learner: memory=3G,processes=512,kernels=4 (any of them; "
                                                "the others keep their value)")
    up.add_argument("--idle-timeout", default="3600", help="seconds before the culler stops an idle server")
    sub.add_parser("status")
    down = sub.add_parser("stop")
    down.add_argument("--forget", action="store_true", help="also delete the room's system users and its state")
    password = sub.add_parser("password")
    password.add_argument("which", choices=["room", "instructor"])
    change = sub.add_parser("limits")
    change.add_argument("limits", help="memory=3G,processes=512,kernels=4 (any of them)")
    args = parser.parse_args(argv)
    state = state_dir(args.state)
    if args.command == "start":
        try:  # every argument checked before anything runs (make passes them through as typed)
            ip, port = check_ip(args.ip), check_count(args.port, "--port", 1, 65535)
            idle_s = check_count(args.idle_timeout, "--idle-timeout (seconds)", 60, 7 * 86400)
            learners = check_learners(args.learners) or None
            check_name(args.instructor, "instructor name")
            parse_limits(args.limits)
        except ValueError as error:
            raise HubError(str(error)) from None
        if learners and args.instructor in learners:
            raise HubError(f"--instructor {args.instructor!r} must not also be a learner")
        start(state, ip, port, learners, args.instructor, args.limits, idle_s)
    elif args.command == "status":
        found = running(state)
        print(f"The room's hub is running: {found['url']} (pid {found['pid']})" if found else "No room hub is running.")
    elif args.command == "stop":
        stop(state, forget=args.forget)
    elif args.command == "limits":
        try:
            set_limits(state, args.limits)
        except ValueError as error:
            raise HubError(str(error)) from None
    else:
        set_password(state, args.which)


if __name__ == "__main__":
    main()
