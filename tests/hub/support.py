"""What the hub tests share: one room (a hub with learners `a` and `b` and an instructor, all
throw-away system users, started as `make hub` starts it), and a way to run code in a learner's kernel.

The room is the `room` fixture of tests/hub/conftest.py, one for the session: the last room test
(test_room_stop.py) stops it and checks that nothing is left.
"""
from __future__ import annotations

import json
import os
import pwd
import secrets
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path

import psutil

from hub.client import NOTEBOOKS, HubClient, Kernel
from hub.room import free_port

ROOT = Path(__file__).resolve().parents[2]
TOOL = [sys.executable, str(ROOT / "tools" / "hub.py")]
MEM_LIMIT = 2 * 2**30
LIMITS = "memory=2G,processes=256,kernels=3"  # each learner's (hub/settings.py)
CHECK = "from widgets.lessons.beginner_1 import beginner_exercises\nex = beginner_exercises()\n"
ARTIFACTS = ROOT / "test-artifacts"


class Room:
    def __init__(self, state: Path, info: dict, names: dict, room_password: str, instructor_password: str):
        self.state, self.info, self.names = state, info, names
        self.room_password, self.instructor_password = room_password, instructor_password
        self.url = info["url"]
        self.clients: dict[str, HubClient] = {}

    def learner(self, key: str) -> HubClient:
        """Learner `key` ('a' or 'b'), logged in with their own cookie and token, server running."""
        if key not in self.clients:
            client = HubClient(self.url, self.names[key])
            assert client.login(self.room_password)
            client.new_token()
            client.spawn()
            self.clients[key] = client
        return self.clients[key]

    def uids(self) -> set[int]:
        found = set()
        for name in self.names.values():
            try:
                found.add(pwd.getpwnam(name).pw_uid)
            except KeyError:
                pass
        return found

    def processes(self) -> list[psutil.Process]:
        """What the room runs: every learner process, and the hub, proxy and services (marked by the state folder)."""
        uids, found = self.uids(), []
        for p in psutil.process_iter(["pid", "uids"]):
            try:
                if p.info["uids"].real in uids or p.environ().get("LAB_HUB_STATE") == str(self.state):
                    found.append(p)
            except (psutil.Error, OSError):
                pass
        return [p for p in found if p.pid != os.getpid()]


def in_kernel(client: HubClient, code: str, notebook: str = "beginner_1_carrying_bricks.ipynb") -> dict:
    session, kernel = client.open_notebook(f"{NOTEBOOKS}/{notebook}")
    try:
        with Kernel(client, kernel) as k:
            return k.execute(code, timeout=180)
    finally:
        client.close_session(session)


def start_room(state: Path) -> Room:
    """Start the room as `make hub` does; real progress: b passes one exercise, a misses another."""
    tag = secrets.token_hex(2)
    names = {"a": f"ht{tag}a", "b": f"ht{tag}b", "teacher": f"ht{tag}t"}
    passwords = {"LAB_ROOM_PASSWORD": secrets.token_urlsafe(12), "LAB_INSTRUCTOR_PASSWORD": secrets.token_urlsafe(12)}
    the_room = Room(state, {"url": ""}, names, passwords["LAB_ROOM_PASSWORD"], passwords["LAB_INSTRUCTOR_PASSWORD"])
    started = subprocess.run([*TOOL, "--state", str(state), "start", "--learners", f"{names['a']},{names['b']}",
                              "--instructor", names["teacher"], "--port", str(free_port()), "--limits", LIMITS],
                             env={**os.environ, **passwords}, capture_output=True, text=True, timeout=240)
    assert started.returncode == 0, started.stdout + started.stderr
    the_room.info = json.loads((state / "hub.json").read_text())
    the_room.url = the_room.info["url"]
    assert in_kernel(the_room.learner("b"), CHECK + "ex.one_trip.check('B')")["error"] is None
    assert in_kernel(the_room.learner("a"), CHECK + "ex.trips.check(144)")["error"] is None
    return the_room


def stop_room(state: Path) -> subprocess.CompletedProcess:
    return subprocess.run([*TOOL, "--state", str(state), "stop", "--forget"], capture_output=True, text=True, timeout=180)


ROOT_ONLY = {"format": 2, "sets": {"Root only": {"secret": {"title": "Read with group root", "passed": True}}},
             "records": [{"notebook": "Root only", "exercise": "secret", "result": "correct", "time": "2026-12-01T00:00:00Z"}]}


@contextmanager
def planted_link(name: str):
    """The learner `name` replaces their progress file by a link to a root:root 0640 progress file (one that
    group 0 can read: "Root only"), as an attacker would; put back after."""
    user = pwd.getpwnam(name)
    folder = Path(tempfile.mkdtemp(prefix="lab-hub-test-root-"))
    folder.chmod(0o755)
    secret = folder / "records.json"
    secret.write_text(json.dumps(ROOT_ONLY))
    os.chown(secret, 0, 0)
    secret.chmod(0o640)
    progress = Path(user.pw_dir, ".gradient-accumulation-lab", "progress.json")
    kept = progress.with_name("progress.json.kept-by-test")
    progress.rename(kept)
    try:
        progress.symlink_to(secret)
        os.lchown(progress, user.pw_uid, user.pw_gid)
        control = subprocess.run(["cat", str(progress)], user=user.pw_uid, group=0, extra_groups=[], capture_output=True)
        assert b"Read with group root" in control.stdout  # the control: with group 0, the link reads it
        yield
    finally:
        progress.unlink(missing_ok=True)
        kept.rename(progress)
        secret.unlink()
        folder.rmdir()
