"""The room: its file (learners, passwords, limits), the workshop authenticator and the spawner.

The room file, `room.json` in the hub's state folder (mode 600, outside the checkout), is written
by `tools/hub.py` and read here on every login and every spawn, so a new room password or new
limits work without a restart:

    {"learners": ["ada", "ben"], "instructor": "instructor",
     "room_password": {"salt": hex, "scrypt": hex}, "instructor_password": {...},
     "limits": "memory=3G,processes=512,kernels=4", "idle_timeout_s": 3600,
     "created_users": ["ada", "ben", "instructor"]}

For a closed room: one shared password for every learner, bound to the address the instructor
chose (127.0.0.1 unless told otherwise), behind TLS if it leaves the room (instructor/hub.md).
"""
from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import os
import pwd
import secrets
import socket
import subprocess
import sys
import threading
from pathlib import Path

from jupyterhub.auth import Authenticator
from jupyterhub.spawner import LocalProcessSpawner
from traitlets import Unicode

from hub import limits as room_limits
from hub.fork_kernels import ROOM_FD
from hub.settings import Limits, parse_limits

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
NOTEBOOKS_FOLDER = "gradient-accumulation-lab"  # each learner's own copy, in their home
START_HERE = "00_start_here.ipynb"
_SCRYPT = {"n": 2**14, "r": 8, "p": 1}  # ~50 ms a login: cheap for a room, slow for a guesser


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now (the hub's internal ports, a test's hub)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def hash_password(password: str) -> dict:
    if not isinstance(password, str) or len(password) < 8:
        raise ValueError("password must be at least 8 characters")
    salt = secrets.token_bytes(16)
    return {"salt": salt.hex(), "scrypt": hashlib.scrypt(password.encode(), salt=salt, **_SCRYPT).hex()}


def password_matches(password: str, stored: dict) -> bool:
    digest = hashlib.scrypt(password.encode(), salt=bytes.fromhex(stored["salt"]), **_SCRYPT)
    return hmac.compare_digest(digest.hex(), stored["scrypt"])  # constant time


def room_file(state: Path) -> Path:
    return Path(state) / "room.json"


def load_room(state: Path) -> dict:
    return json.loads(room_file(state).read_text())


def save_room(state: Path, room: dict) -> None:
    """Write room.json atomically, mode 600 from the start (never readable by a learner)."""
    path = room_file(state)
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(room, f, indent=1)
    os.replace(tmp, path)


def room_limits_of(room: dict) -> Limits:
    """The room's per-learner limits (room.json's "limits"; a room made before them: the defaults)."""
    return parse_limits(room.get("limits", ""))


class WorkshopAuthenticator(Authenticator):
    """A learner on the room list with the room password; the instructor with their own password.

    Anything else (a name not on the list, a wrong or empty password) is refused. The room file is
    read at each login: `tools/hub.py password` takes effect at once."""

    state_dir = Unicode(help="the hub's state folder, holding room.json").tag(config=True)

    async def authenticate(self, handler, data):
        name = self.normalize_username(str(data.get("username", "")))
        password = str(data.get("password", ""))
        room = load_room(Path(self.state_dir))
        if name == room["instructor"]:
            stored = room["instructor_password"]
        elif name in room["learners"]:
            stored = room["room_password"]
        else:
            stored = None
        ok = password_matches(password, stored or room["room_password"])  # same work whoever asks
        if not password or stored is None or not ok:
            self.log.warning("refused a login as %r", name[:40])
            return None
        return name


class RoomSpawner(LocalProcessSpawner):
    """LocalProcessSpawner with the room's limits and kernels only their owner can reach.

    At each spawn it reads the limits from room.json, makes the learner's cgroups (hub/limits.py:
    v2, else v1, else rlimits) and, in the child before it becomes the learner, puts it in them;
    every kernel and process the learner starts is born inside. The server loads
    hub/singleuser_config.py: kernels on IPC sockets in the learner's mode-700 runtime folder (no
    TCP port another user could subscribe to) and at most `kernels` of them at once."""

    state_dir = Unicode(help="the hub's state folder, holding room.json").tag(config=True)

    async def start(self):
        self.room_limits = room_limits_of(load_room(Path(self.state_dir)))
        self.enforcement = room_limits.prepare(self.user.name, self.room_limits)
        self.log.info("limits of %s: %s, enforced by %s", self.user.name, self.room_limits.text(),
                      self.enforcement.describe())
        self.args = [f"--config={HERE / 'singleuser_config.py'}"]
        environment = {k: v for k, v in self.environment.items() if k != ROOM_FD}
        self.environment = {**environment, "LAB_MAX_KERNELS": str(self.room_limits.kernels)}
        self.popen_kwargs = {k: v for k, v in self.popen_kwargs.items() if k != "pass_fds"}
        # The learner's fork server, forked by the room's as them: their server gets the other end of its pair
        ours, theirs = socket.socketpair()
        try:
            plan = room_limits.joining(self.enforcement, self.room_limits)
            await asyncio.to_thread(RoomForkServer.hand_over, self.user.name, plan, ours, Path(self.state_dir))
            self.environment[ROOM_FD] = str(theirs.fileno())
            self.popen_kwargs["pass_fds"] = (theirs.fileno(),)
        except OSError as error:  # their server then starts a fork server of its own
            self.log.warning("the room's fork server did not take %s: %s", self.user.name, error)
        finally:
            ours.close()
        try:
            return await super().start()
        finally:
            theirs.close()  # their server holds it now

    def make_preexec_fn(self, name):
        demote = super().make_preexec_fn(name)
        enforcement, limits = self.enforcement, self.room_limits

        def preexec():
            room_limits.join(enforcement, limits)  # as root: the groups' files are root's
            demote()

        return preexec


class RoomForkServer:
    """The room's fork server (hub/fork_kernels.py --room): root's, started by the hub at the first spawn, it
    imports torch and the lab once and forks each learner's fork server as that learner. Only the hub holds
    its channel; it starts with a clean environment (no token of the hub's is in its memory, which every
    learner's kernels copy), and ends with the hub."""

    _lock = threading.Lock()
    _process: subprocess.Popen | None = None
    _channel: socket.socket | None = None

    @classmethod
    def hand_over(cls, name: str, plan: dict, learner_end: socket.socket, state: Path) -> None:
        """Ask for learner `name`'s fork server, doing `plan` (hub/limits.py `joining`) as root and serving
        `learner_end`. OSError if the room's fork server cannot be reached."""
        with cls._lock:
            if cls._process is None or cls._process.poll() is not None:
                if cls._channel is not None:  # the one that ended: its channel goes with it
                    cls._channel.close()
                ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
                environment = {"PATH": os.environ.get("PATH", os.defpath), "LANG": "C.UTF-8", "MALLOC_ARENA_MAX": "4",
                               "MPLCONFIGDIR": str(state / "matplotlib"),  # its font cache, kept with the room's state
                               "LAB_HUB_STATE": str(state)}  # the mark make hub-stop finds it by
                cls._process = subprocess.Popen(
                    [sys.executable, str(HERE / "fork_kernels.py"), "--room", str(theirs.fileno())],
                    pass_fds=[theirs.fileno()], env=environment, cwd="/", stdin=subprocess.DEVNULL,
                    start_new_session=True)
                theirs.close()
                cls._channel = ours
            socket.send_fds(cls._channel, [json.dumps({"name": name, **plan}).encode()], [learner_end.fileno()])


def copy_notebooks(spawner) -> None:
    """pre_spawn_hook: give the learner their own copy of the notebooks, once, made *as the learner*.

    Run as the learner (not as root) so that nothing a learner planted in their home (a symlink
    named like the folder) can make the hub write elsewhere; the copy is theirs by construction."""
    user = pwd.getpwnam(spawner.user.name)
    subprocess.run(
        [sys.executable, str(HERE / "first_spawn.py"), str(ROOT / "notebooks"), NOTEBOOKS_FOLDER],
        user=user.pw_uid, group=user.pw_gid, extra_groups=[], cwd=user.pw_dir, check=True, timeout=60,
        env={"HOME": user.pw_dir, "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"},
    )
