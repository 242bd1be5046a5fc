"""What one learner can do to another through the machine rather than over HTTP: read their kernel's
sockets, plant a link for the room view to follow, take the memory, processes or kernels they need.

The learners are the session's room (tests/hub/support.py): `a` is the target or the attacker, `b`
the other one. Each attack runs as a learner would run it: code in their own kernel, as their user,
inside their own limits.
"""
from __future__ import annotations

import json
import os
import pwd
import stat
import threading
import time
from pathlib import Path

import psutil
import pytest

from hub import limits as room_limits
from hub.client import NOTEBOOKS, HubClient, Kernel
from tests.hub.support import MEM_LIMIT, in_kernel, planted_link

NOTEBOOK = f"{NOTEBOOKS}/beginner_1_carrying_bricks.ipynb"

# --- 1. kernels only their owner can reach --------------------------------------------------------

# Run in b's kernel: every socket of a's that b can name, subscribed to and connected to for 4 s.
# TCP: each port a's uid listens on (/proc/net/tcp{,6} has every socket's uid). IPC: /proc/net/unix
# lists every bound Unix socket's path on the machine, a's kernel sockets included.
EAVESDROP = """
import json, os, socket, time, zmq
A_UID, A_HOME = {uid}, {home!r}
found = {{"tcp": [], "ipc": [], "unix_connect": {{}}, "received": 0}}
for table in ("/proc/net/tcp", "/proc/net/tcp6"):
    for line in open(table).read().splitlines()[1:]:
        f = line.split()
        if f[3] == "0A" and int(f[7]) == A_UID:  # 0A: listening
            found["tcp"].append(int(f[1].rsplit(":", 1)[1], 16))
for line in open("/proc/net/unix").read().splitlines()[1:]:
    f = line.split()
    if len(f) >= 8 and f[7].startswith(A_HOME + "/"):
        found["ipc"].append(f[7])
ctx, sockets = zmq.Context(), []
for address in [f"tcp://127.0.0.1:{{p}}" for p in found["tcp"]] + [f"ipc://{{p}}" for p in found["ipc"]]:
    for kind in (zmq.SUB, zmq.DEALER, zmq.PUSH):
        s = ctx.socket(kind)
        if kind == zmq.SUB:
            s.setsockopt(zmq.SUBSCRIBE, b"")
        s.connect(address)
        if kind == zmq.PUSH:  # a forged output for a's notebook (ipykernel's pipe wants a 16-byte key first)
            s.send_multipart([os.urandom(16), b"<IDS|MSG>", b"forged by b"], zmq.NOBLOCK)
        sockets.append(s)
for path in found["ipc"]:
    raw = socket.socket(socket.AF_UNIX)
    try:
        raw.connect(path)
        found["unix_connect"][path] = "connected"
    except OSError as error:
        found["unix_connect"][path] = error.strerror
    raw.close()
poller = zmq.Poller()
for s in sockets:
    if s.type != zmq.PUSH:
        poller.register(s, zmq.POLLIN)
deadline = time.time() + 4
while time.time() < deadline:
    for s, _ in poller.poll(200):
        found["received"] += len(s.recv_multipart())
for s in sockets:
    s.close(linger=0)
print(json.dumps(found))
"""
TALK = "import time\nfor i in range(150):\n    print('a is typing', i, flush=True)\n    time.sleep(0.1)\n"


def subscribe(address: str, seconds: float) -> int:
    """Messages a SUB socket connected to `address` receives in `seconds` (the control: run as root)."""
    import zmq
    ctx = zmq.Context()
    s = ctx.socket(zmq.SUB)
    s.setsockopt(zmq.SUBSCRIBE, b"")
    s.connect(address)
    got, deadline = 0, time.monotonic() + seconds
    while time.monotonic() < deadline:
        if s.poll(200):
            got += len(s.recv_multipart())
    s.close(linger=0)
    ctx.term()
    return got


def kernel_process(uid: int, kernel_id: str) -> psutil.Process:
    """The learner's process that bound the kernel's IPC sockets (a forked kernel has its fork server's
    command line, hub/fork_kernels.py, so the sockets name it), once it has bound them (within 60 s)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        for p in psutil.process_iter(["uids"]):
            if p.info["uids"] and p.info["uids"].real == uid:
                try:
                    if any(kernel_id in (c.laddr or "") for c in p.net_connections(kind="unix")):
                        return p
                except psutil.Error:  # it ended meanwhile
                    continue
        time.sleep(0.5)
    raise AssertionError(f"no kernel process {kernel_id}")


def test_kernels_are_forked_by_the_learners_own_fork_server(room):
    """A learner's kernel is a child of their fork server (hub/fork_kernels.py): both theirs, in their limits'
    groups, and the fork server reachable by no socket anyone could open (only a socket pair with their server).
    It was forked by the room's fork server (root's, the hub's child), and holds none of its sockets."""
    a, b = room.learner("a"), room.learner("b")
    uid = pwd.getpwnam(a.name).pw_uid
    sessions = [(a, *a.open_notebook(NOTEBOOK)), (b, *b.open_notebook(NOTEBOOK))]
    try:
        kernel = kernel_process(uid, sessions[0][2])
        server = kernel.parent()
        assert "fork_kernels.py" in " ".join(server.cmdline())
        assert {*kernel.uids(), *server.uids()} == {uid} and set(server.gids()) == {pwd.getpwnam(a.name).pw_gid}
        theirs = [p for p in psutil.process_iter(["uids", "cmdline"]) if p.info["uids"] and p.info["uids"].real == uid
                  and "jupyterhub-singleuser" in " ".join(p.info["cmdline"] or [])]
        assert len(theirs) == 1  # their Jupyter server, which the hub put in their groups and rlimits
        assert room_limits.effective(kernel.pid) == room_limits.effective(server.pid) == room_limits.effective(theirs[0].pid)
        assert not server.net_connections(kind="inet")
        pairs = server.net_connections(kind="unix")
        assert len(pairs) == 1 and not pairs[0].laddr, pairs  # unnamed: the pair with their server, nothing else
        room_server = server.parent()
        assert room_server.uids().real == 0 and "--room" in room_server.cmdline()
        assert "jupyterhub" in " ".join(room_server.parent().cmdline())  # the hub's child
        other = kernel_process(pwd.getpwnam(b.name).pw_uid, sessions[1][2]).parent()
        assert other.parent().pid == room_server.pid and other.pid != server.pid  # one room's, one each
        # they share the room's pages: most of what a learner's fork server maps is not its own
        memory = server.memory_full_info()
        assert memory.uss < memory.rss / 2, memory
    finally:
        for learner, session, _ in sessions:
            learner.close_session(session)


def test_another_learner_can_neither_subscribe_to_nor_connect_to_a_kernels_sockets(room):
    a, b = room.learner("a"), room.learner("b")
    user = pwd.getpwnam(a.name)
    session, kernel_id = a.open_notebook(NOTEBOOK)
    try:
        runtime = Path(user.pw_dir, ".local", "share", "jupyter", "runtime")
        connection = json.loads((runtime / f"kernel-{kernel_id}.json").read_text())
        assert connection["transport"] == "ipc" and connection["ip"].startswith(str(runtime) + "/")
        assert runtime.stat().st_mode & 0o777 == 0o700 and Path(user.pw_dir).stat().st_mode & 0o777 == 0o700  # (+t: jupyter's)
        sockets = {f"{connection['ip']}-{connection[f'{c}_port']}" for c in ("shell", "iopub", "stdin", "control", "hb")}
        with Kernel(a, kernel_id) as k:
            assert k.execute("pass")["error"] is None  # the kernel is up: its sockets are bound
            assert all(stat.S_ISSOCK(os.stat(s).st_mode) for s in sockets)
            # Its one TCP port is ipykernel's IOPub pipe (output of forked children): a PULL socket, which
            # gives nothing to read and forwards only messages that start with a random 16-byte key.
            kernel = kernel_process(user.pw_uid, kernel_id)
            tcp = [c.laddr for c in kernel.net_connections(kind="inet") if c.status == psutil.CONN_LISTEN]
            assert len(tcp) <= 1 and {addr.ip for addr in tcp} <= {"127.0.0.1"}, tcp
            said: dict = {}
            talking = threading.Thread(target=lambda: said.update(k.execute(TALK, timeout=120)))
            talking.start()
            time.sleep(1)
            iopub = f"ipc://{connection['ip']}-{connection['iopub_port']}"
            assert subscribe(iopub, 2) > 0  # the control: root, who may open the folder, hears a typing
            result = in_kernel(b, EAVESDROP.format(uid=user.pw_uid, home=user.pw_dir))
            talking.join()
        assert result["error"] is None, result
        seen = json.loads(result["stdout"])
        assert sockets <= set(seen["ipc"]), seen  # b named every one of a's kernel sockets ...
        assert {seen["unix_connect"][s] for s in sockets} == {"Permission denied"}, seen  # ... and reached none
        assert seen["received"] == 0, seen
        assert len(seen["tcp"]) == 1 + len(tcp), seen  # their server's HTTP port (token required), the pipe
        assert said["stdout"] == "".join(f"a is typing {i}\n" for i in range(150)), said  # nothing forged got in
    finally:
        a.close_session(session)


# --- 3. the room view reads as the learner, and only the learner ----------------------------------

def test_the_room_view_reads_progress_as_the_learner_alone(room):
    """a replaces their progress file by a link to a root:root 0640 file: the view must not show it."""
    a = room.learner("a")
    with planted_link(a.name):
        teacher = HubClient(room.url, room.names["teacher"])
        assert teacher.login(room.instructor_password)
        rows = {row["name"]: row for row in teacher.http.get(f"{room.url}/services/room/api/room", timeout=60).json()["learners"]}
        row = rows[a.name]
        assert "Root only" not in json.dumps(row) and "secret" not in json.dumps(row["passed"]), row
        assert "Permission denied" in str(row["problem"]), row


# --- 4. one learner cannot starve another ---------------------------------------------------------

# Run in a's kernel: each attack in a process of its own that volunteers to be the one the OOM killer
# takes (oom_score_adj 1000), as a's processes; the kernel reports what each achieved, then cleans up.
ATTACKS = """
import json, os, signal, subprocess, sys
LIMIT = {limit}
ATTACKER = "open('/proc/self/oom_score_adj', 'w').write('1000')\\n"
SHM = "/dev/shm/lab-hub-test-" + str(os.getpid())
report = {{}}

def attack(code, timeout=120):
    run = subprocess.run([sys.executable, "-c", ATTACKER + code], capture_output=True, text=True, timeout=timeout)
    return {{"exit": run.returncode, "said": run.stdout.strip()[-300:], "why": run.stderr.strip()[-300:]}}

# RAM-backed /dev/shm: write 1 MB at a time up to twice the limit; say how far it got
report["shm"] = attack(f'''
import sys
written = 0
with open({{SHM!r}}, "wb") as f:
    try:
        while written < 2 * {{LIMIT}}:
            f.write(b"x" * 2**20); f.flush(); written += 2**20
            if written % 2**26 == 0: print(written, flush=True)
    except OSError as error:
        print(written, error.strerror, flush=True)
print(written, "done", flush=True)
''')
report["shm_file_mb"] = os.path.getsize(SHM) // 2**20 if os.path.exists(SHM) else 0
if os.path.exists(SHM):
    os.unlink(SHM)

# memory: three processes, each holding 60% of the limit (each under the per-process limit)
report["memory"] = attack(f'''
import subprocess, sys, time
hold = "import time\\\\ndata = b'x' * int(0.6 * {{LIMIT}})\\\\nprint('held', flush=True)\\\\ntime.sleep(4)"
children = [subprocess.Popen([sys.executable, "-c", hold], stdout=subprocess.PIPE, text=True) for _ in range(3)]
print([c.stdout.read().strip() or "-" for c in children], [c.wait() for c in children], flush=True)
''')

# processes: fork until the kernel says no (each child sleeps), then end them all
report["processes"] = attack('''
import os, signal, time
children = []
try:
    while len(children) < 100000:
        pid = os.fork()
        if pid == 0:
            time.sleep(30)
            os._exit(0)
        children.append(pid)
    print(len(children), "no limit met", flush=True)
except OSError as error:
    print(len(children), error.strerror, flush=True)
for pid in children:
    os.kill(pid, signal.SIGKILL)
for pid in children:
    os.waitpid(pid, 0)
''')
print(json.dumps(report))
"""
QUICK_CELL = "print(sum(range(10**6)))"


def test_one_learner_cannot_starve_another(room, report):
    """While a tries every way to take the room (memory, /dev/shm, processes, kernels), a cell in b's
    kernel still runs, each time within 5 s; and each attack stops at a's own limit."""
    a, b = room.learner("a"), room.learner("b")
    a_uid = pwd.getpwnam(a.name).pw_uid
    session_b, kernel_b = b.open_notebook(NOTEBOOK)
    session_a, kernel_a = a.open_notebook(NOTEBOOK)
    extra_kernels: list[str] = []
    outcome: dict = {}

    def attack():
        try:
            with Kernel(a, kernel_a) as k:
                outcome["attacks"] = k.execute(ATTACKS.format(limit=MEM_LIMIT), timeout=300)
            for _ in range(10):  # kernels: as many as the server will start
                started = a.server_api("POST", "kernels", json={"name": "python3"})
                if started.status_code != 201:
                    outcome["kernels_refused"] = (started.status_code, started.json().get("message", ""))
                    break
                extra_kernels.append(started.json()["id"])
        except Exception as error:  # noqa: BLE001 -- reported by the assertions below
            outcome["failed"] = repr(error)

    try:
        enforced = room_limits.effective(kernel_process(a_uid, kernel_a).pid)
        with Kernel(b, kernel_b) as k:
            assert k.execute(QUICK_CELL)["stdout"] == "499999500000\n"
            attacker = threading.Thread(target=attack)
            attacker.start()
            seconds = []
            while attacker.is_alive():
                t0 = time.monotonic()
                assert k.execute(QUICK_CELL, timeout=30)["stdout"] == "499999500000\n"
                seconds.append(time.monotonic() - t0)
                time.sleep(0.2)
            attacker.join()
        assert "failed" not in outcome, outcome
        assert outcome["attacks"]["error"] is None, outcome
        done = json.loads(outcome["attacks"]["stdout"])
        assert len(seconds) >= 5 and max(seconds) < 5, seconds
        # kernels: the cap (3), counting the one the attacks ran in
        assert len(extra_kernels) == 2 and outcome["kernels_refused"][0] == 403, outcome
        assert "At most 3 kernels" in outcome["kernels_refused"][1]
        memory_group = "memory" in enforced or "cgroup2" in enforced
        if memory_group:  # cgroup: /dev/shm pages count against a's memory; the writer is the one killed
            assert done["shm"]["exit"] == -9 and done["shm_file_mb"] < MEM_LIMIT // 2**20, done
            held = done["memory"]  # one of the three holders (or their parent) was killed
            assert held["exit"] == -9 or -9 in json.loads(held["said"].split("] ", 1)[1]), done
        else:  # rlimits: a file stops at the per-process limit (EFBIG); the sum is not bounded
            assert "File too large" in done["shm"]["said"] and done["shm_file_mb"] <= MEM_LIMIT // 2**20, done
        forks = int(done["processes"]["said"].split()[0])
        assert "no limit met" not in done["processes"]["said"] and forks < 256, done
        assert in_kernel(a, "print(1 + 1)")["stdout"] == "2\n"  # and a's server survived its own attacks
        report["memory"] = ("cgroup (the sum of a learner's processes, /dev/shm included): the /dev/shm writer was "
                            f"killed at {done['shm_file_mb']} MB of {MEM_LIMIT >> 20}" if memory_group else
                            f"rlimits (per process; per file {done['shm_file_mb']} MB): the sum is not bounded here")
        report["processes"] = f"{forks} forks, then '{done['processes']['said'].split(' ', 1)[1]}'"
        report["kernels"] = f"the server refused kernel 4 with {outcome['kernels_refused'][0]}"
        report["enforced"] = json.dumps(enforced)
        report["other learner"] = f"{len(seconds)} cells in b's kernel meanwhile, the slowest {max(seconds):.2f} s"
    finally:
        for kernel in extra_kernels:
            a.server_api("DELETE", f"kernels/{kernel}")
        a.close_session(session_a)
        b.close_session(session_b)


@pytest.fixture(autouse=True)
def _no_test_files_left():
    yield
    assert not list(Path("/dev/shm").glob("lab-hub-test-*"))
