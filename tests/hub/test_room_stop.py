"""Last of the room's tests: `make hub-stop` (tools/hub.py stop) leaves no process, port, user, cgroup
or shared-memory file of the room, also while a learner runs a loop that keeps forking."""
from __future__ import annotations

import time
from pathlib import Path

import psutil

from hub import limits as room_limits
from tests.hub.support import in_kernel, stop_room

# Each pass forks a subshell that leaves a `sleep` behind and exits: the sleeps are orphans (no parent
# of the room's to stop them with) and the loop forks again as fast as it can, as long as it lives.
FORKING_LOOP = """
import subprocess, time
loop = subprocess.Popen(["/bin/sh", "-c", "while :; do (sleep 600 &); done"], start_new_session=True)
open("/dev/shm/lab-hub-test-" + str(loop.pid), "wb").write(b"x" * 2**20)  # RAM that outlives its writer
time.sleep(3)
print(loop.pid)
"""


def learner_processes(uids: set[int]) -> list[psutil.Process]:
    found = []
    for p in psutil.process_iter(["uids", "status"]):
        try:
            if p.info["uids"] and set(p.info["uids"]) & uids:
                found.append(p)
        except psutil.Error:
            pass
    return found


def test_stop_ends_everything_it_started_a_forking_loop_included(room, report):
    a = room.learner("a")
    uids = room.uids()
    loop = in_kernel(a, FORKING_LOOP)
    assert loop["error"] is None, loop
    forking = len(learner_processes(uids))
    assert forking > 20, forking  # the loop is running, kept in bounds only by the processes limit
    before = room.processes()
    assert any(p.pid == room.info["pid"] for p in before) and len(before) >= 5
    groups = [g for name in room.names.values() for g in room_limits.groups_of(name)]
    started = time.monotonic()
    stopped = stop_room(room.state)
    seconds = time.monotonic() - started
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    assert "Still there" not in stopped.stdout, stopped.stdout
    # no time.sleep here: stop returns only once nothing of the room is left, zombies reaped included
    assert [p for p in before if p.is_running()] == []
    assert learner_processes(uids) == []
    assert room.uids() == set()  # the users are deleted
    assert not room.state.exists()
    assert not [g for g in groups if g.exists()]
    assert not [f for f in Path("/dev/shm").iterdir() if f.lstat().st_uid in uids]
    ports = {room.info["port"], room.info["LAB_HUB_HUB_PORT"], room.info["LAB_HUB_API_PORT"], room.info["LAB_HUB_ROOM_PORT"]}
    assert not [c for c in psutil.net_connections(kind="inet") if c.status == psutil.CONN_LISTEN and c.laddr.port in ports]
    report["stop"] = (f"{stopped.stdout.strip().splitlines()[-1]} in {seconds:.1f} s, with a forking loop running "
                      f"({forking} processes of the learner when it began); {len(groups)} cgroups removed")
