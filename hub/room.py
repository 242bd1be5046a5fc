"""The room: its file (learners, passwords, limits), the workshop authenticator and the spawner.

The room file, `room.json` in the hub's state folder (mode 600, outside the checkout), is written
by `tools/hub.py` and read here on every login, so a new room password works without a restart:

    {"learners": ["ada", "ben"], "instructor": "instructor",
     "room_password": {"salt": hex, "scrypt": hex}, "instructor_password": {...},
     "mem_limit": "3G", "idle_timeout_s": 3600, "created_users": ["ada", "ben", "instructor"]}

For a closed room: one shared password for every learner, bound to the address the instructor
chose (127.0.0.1 unless told otherwise), behind TLS if it leaves the room (instructor/hub.md).
"""
from __future__ import annotations

import hashlib
import hmac
import json
import os
import pwd
import re
import resource
import secrets
import socket
import subprocess
import sys
from pathlib import Path

from jupyterhub.auth import Authenticator
from jupyterhub.spawner import LocalProcessSpawner
from traitlets import Unicode

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
NAME = re.compile(r"^[a-z][a-z0-9]{1,15}$")  # a system user name that needs no escaping anywhere
NOTEBOOKS_FOLDER = "gradient-accumulation-lab"  # each learner's own copy, in their home
START_HERE = "00_start_here.ipynb"
_SCRYPT = {"n": 2**14, "r": 8, "p": 1}  # ~50 ms a login: cheap for a room, slow for a guesser


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now (the hub's internal ports, a test's hub)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def check_name(name: str, what: str = "learner name") -> str:
    if not isinstance(name, str) or not NAME.match(name):
        raise ValueError(f"{what} {name!r} must be 2 to 16 lowercase letters or digits, starting with a letter")
    return name


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


def parse_bytes(text: str) -> int:
    """'3G' -> 3 * 2**30 (the units of JupyterHub's mem_limit: K, M, G, T)."""
    match = re.fullmatch(r"(\d+)([KMGT]?)", str(text).strip().upper())
    if not match:
        raise ValueError(f"mem_limit {text!r} must be a number of bytes with K, M, G or T, e.g. '3G'")
    return int(match[1]) * 1024 ** " KMGT".index(match[2] or " ")


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
    """LocalProcessSpawner that enforces `mem_limit`, and copies the notebooks at first spawn.

    LocalProcessSpawner itself ignores mem_limit. Here it is an RLIMIT_AS (address space) set in
    the child before it drops to the learner: it bounds each of the learner's processes (the
    server, each kernel) separately, not their sum; an allocation past it raises MemoryError in
    that kernel, and no other learner is touched. A cgroup per learner (TLJH's systemd slices,
    Kubernetes) bounds the sum instead: instructor/hub.md."""

    def make_preexec_fn(self, name):
        demote = super().make_preexec_fn(name)
        limit = int(self.mem_limit or 0)

        def preexec():
            if limit:
                resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
            demote()

        return preexec


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
