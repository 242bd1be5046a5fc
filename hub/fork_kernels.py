"""Kernels forked from a warm parent: a learner's kernels share the pages of what every notebook imports.

Each Python kernel that imports torch holds about 120 MB of its own (torch's registrations and
modules), and about 70 MB more once an optimizer is made (torch imports torch._dynamo then): with
two notebooks open a learner held 600 MB (PSS, benchmarks/hub_room.py). A *fork server* imports those
modules once and forks each kernel: a kernel's pages stay shared with it until written (copy on write),
so a second notebook costs its own work, not another torch.

In the room, one process forks every learner's fork server: the *room's fork server*, started by the
hub (root, hub/room.py), imports once for the whole room, so forty learners share one copy of those
pages. It takes requests from the hub alone, over a socket pair no one else holds: a learner's name,
what their limits need done as root (hub/limits.py `joining`) and their end of a socket pair with their
Jupyter server. Its child enters the learner's groups, becomes the learner (their groups and uid; no way
back) and serves their server alone. Nothing secret is in its memory: it started with a clean
environment and holds no other learner's socket. Where there is no room (one learner's own server, a
pod of Zero to JupyterHub) the server starts a fork server of its own, as that learner.

Either way a learner's fork server is their process, reachable by no file or port, forking only their
kernels. It ends when their server closes the pair (a kernel it forked ends with it: ipykernel's parent
poller), so nothing outlives the server. A kernel command that is not `<this Python> -m ipykernel_launcher
...` starts as usual.
"""
from __future__ import annotations

import asyncio
import ctypes
import gc
import importlib
import json
import os
import pwd
import resource
import signal
import socket
import subprocess
import sys
import threading
import time
from importlib.metadata import EntryPoint
from pathlib import Path

import psutil
from jupyter_client.provisioning import KernelProvisionerFactory, LocalProvisioner

NAME = "lab-fork-provisioner"
# What a kernel's start and the lab's first notebooks import; torch._dynamo because torch imports it at an
# optimizer's first use. Only modules that compute nothing at import: a torch operation would start torch's
# thread pool, which a forked child cannot use (serve() checks that no thread started).
PRELOAD = ("ipykernel.kernelapp", "ipykernel.ipkernel", "ipykernel.debugger", "IPython.core.debugger", "sqlite3",
           "matplotlib.figure", "matplotlib.backends.backend_agg", "matplotlib_inline.backend_inline", "PIL.Image",
           "PIL.PngImagePlugin", "ipywidgets", "psutil", "filelock", "torch", "torch._dynamo",
           "widgets.lessons.start_here", "widgets.lessons.beginner_1", "widgets.lessons.beginner_2")
LAUNCHER = ["-m", "ipykernel_launcher"]
ROOM_FD = "LAB_FORK_FD"  # in a learner's server: the fd of their end of the pair with their fork server
PR_SET_DUMPABLE = 4  # <linux/prctl.h>


# --- a fork server: a process of the learner's, started by their server or forked by the room's ----------
def preload() -> str | None:
    """Import PRELOAD and freeze what is there; why forking would be unsafe, if it would be."""
    import numpy  # noqa: F401 -- its BLAS threads, started at import, are what any forking numpy program has

    threads = _threads()
    for module in PRELOAD:
        importlib.import_module(module)
    refusal = None
    if _threads() > threads:  # matplotlib's font-cache timer ends at once; a thread pool stays
        time.sleep(1)
        if _threads() > threads:
            refusal = f"a thread started while importing {', '.join(PRELOAD)}: forking it is unsafe"
    gc.collect()
    gc.freeze()  # the collector leaves the preloaded objects alone, here and in each kernel: their pages stay shared
    # children are reaped as they end: a kernel that ended is no zombie the provisioner would see alive
    signal.signal(signal.SIGCHLD, lambda *_: _reap())
    return refusal


def serve(fd: int, refusal: str | None) -> None:
    """Fork a kernel for each request read from the socket `fd` until it closes.

    A request is one JSON line {"argv", "cwd", "env"}; the answer one line {"pid"} or {"error"}."""
    channel = socket.socket(fileno=fd)
    stream = channel.makefile("rwb", buffering=0)
    for line in stream:
        if refusal:
            stream.write(json.dumps({"error": refusal}).encode() + b"\n")
            continue
        try:
            request = json.loads(line)
            pid = os.fork()
        except Exception as error:  # noqa: BLE001 -- said to the server, which then starts it plainly
            stream.write(json.dumps({"error": f"{type(error).__name__}: {error}"}).encode() + b"\n")
            continue
        if pid == 0:
            _become_kernel(request, channel)
        try:
            os.setpgid(pid, pid)  # also in the child: whichever runs first, its group exists at once
        except OSError:  # the child made it already, or has ended
            pass
        stream.write(json.dumps({"pid": pid}).encode() + b"\n")


# --- the room's fork server: root's, started by the hub, one for the whole room --------------------------
def serve_room(fd: int) -> None:
    """Preload, then for each message from the hub on `fd` (a sequenced-packet socket): one JSON object
    {"name", "procs", "rlimits"} with the learner's end of a socket pair attached, fork their fork server."""
    refusal = preload()
    hub = socket.socket(fileno=fd)
    while True:
        message, fds, _, _ = socket.recv_fds(hub, 65536, 1)
        if not message:
            return  # the hub ended: the learners' fork servers go on until their servers close
        if not fds:
            continue
        try:
            learner = json.loads(message)
            user = pwd.getpwnam(learner["name"])
            if user.pw_uid == 0 or not all(p.startswith("/sys/fs/cgroup/") and p.endswith("/cgroup.procs")
                                           for p in learner["procs"]):
                raise ValueError(f"not a learner's: {message[:200]!r}")
            pid = os.fork()
        except Exception as error:  # noqa: BLE001 -- the learner's kernels then start as usual
            print(f"the room's fork server refused a request: {error}", file=sys.stderr, flush=True)
            os.close(fds[0])
            continue
        if pid == 0:
            code = 1
            try:
                hub.close()  # first: no learner's process may hold the hub's channel
                _become_learner(user, learner)
                serve(fds[0], refusal)
                code = 0
            except BaseException:  # noqa: BLE001 -- into the hub's log; their kernels then start as usual
                import traceback

                traceback.print_exc()
            finally:
                os._exit(code)
        os.close(fds[0])  # the next learner's fork server must not inherit this one's socket


def _become_learner(user: pwd.struct_passwd, learner: dict) -> None:
    """As root in the room's fork server's child: the learner's groups and rlimits (hub/limits.py), then their
    groups and uid, for good; their home and a plain environment (each kernel gets its server's)."""
    os.setsid()  # out of the room's fork server's session: a signal to it is not to the learner's processes
    for procs in learner["procs"]:
        with open(procs, "w") as f:
            f.write("0")
    for which, value in learner["rlimits"]:
        resource.setrlimit(which, (value, value))
    os.initgroups(user.pw_name, user.pw_gid)
    os.setgid(user.pw_gid)
    os.setuid(user.pw_uid)
    if os.getuid() != user.pw_uid or os.geteuid() != user.pw_uid or 0 in os.getgroups():
        raise PermissionError(f"could not become {user.pw_name}")
    # A process that changed its uid is not dumpable: its /proc files stay root's, which keeps its owner
    # from reading them (psutil in their kernels). It holds nothing of anyone else's: dumpable again.
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)
    os.chdir(user.pw_dir)
    os.environ.clear()
    os.environ.update(HOME=user.pw_dir, USER=user.pw_name, LOGNAME=user.pw_name, PATH=os.defpath)


def _threads() -> int:
    return len(os.listdir("/proc/self/task"))


def _reap() -> None:
    try:
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass
    except ChildProcessError:
        pass


def _reseed() -> None:
    """Fresh seeds from the system for the generators seeded at import: each kernel its own, as if started
    alone (torch's default seed is a constant anyway)."""
    import random

    import numpy

    random.seed()
    numpy.random.seed()


def _become_kernel(request: dict, channel: socket.socket) -> None:
    """In the forked child: this kernel's own group, folder and environment, then ipykernel; never returns."""
    code = 1
    try:
        channel.close()
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        os.setpgid(0, 0)  # an interrupt or a kill of the group reaches this kernel and its children only
        os.chdir(request["cwd"])
        sys.path.insert(0, request["cwd"])  # as `python -m` puts the folder it starts in first
        _reseed()
        os.environ.clear()
        os.environ.update(request["env"])
        # What the preloaded modules read from the environment at import, read again from the kernel's:
        # matplotlib its backend (ipykernel's inline one unless the environment names another)
        import matplotlib

        os.environ.setdefault("MPLBACKEND", "module://matplotlib_inline.backend_inline")
        matplotlib.rcParams["backend"] = os.environ["MPLBACKEND"]
        # and ipykernel its parent, whose end ends the kernel: this fork server, which ends with the server
        argv = [*request["argv"][3:], f"--IPKernelApp.parent_handle={os.getppid()}"]
        sys.argv = [sys.executable, *argv]
        from ipykernel.kernelapp import launch_new_instance

        launch_new_instance(argv=argv)
        code = 0
    except SystemExit as done:
        code = done.code if isinstance(done.code, int) else 1
    except BaseException:  # noqa: BLE001 -- its traceback goes to the server's log, then the process ends
        import traceback

        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


# --- the server's side -----------------------------------------------------------------------------
class ForkServer:
    """The learner's fork server: the room's child whose pair the hub passed (`ROOM_FD`), else one this
    server starts at its first kernel. One per Jupyter server."""

    _lock = threading.Lock()
    _process: subprocess.Popen | None = None
    _channel = None
    _room_fd: int | None = None  # taken from the environment by register()

    @classmethod
    def fork(cls, argv: list[str], cwd: str, env: dict) -> int:
        """A kernel forked with `argv`, `cwd` and `env`: its pid (OSError if the fork server cannot)."""
        with cls._lock:
            if cls._room_fd is not None:
                cls._channel = socket.socket(fileno=cls._room_fd).makefile("rwb", buffering=0)
                cls._room_fd = None
            if cls._channel is None or cls._process is not None and cls._process.poll() is not None:
                if cls._channel is not None:
                    cls._channel.close()  # the ended fork server's end of the pair, not left open beside the new one
                ours, theirs = socket.socketpair()
                cls._process = subprocess.Popen([sys.executable, __file__, str(theirs.fileno())],
                                                pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL)
                theirs.close()
                cls._channel = ours.makefile("rwb", buffering=0)
            try:
                cls._channel.write(json.dumps({"argv": argv, "cwd": cwd, "env": env}).encode() + b"\n")
                line = cls._channel.readline()
            except OSError:
                line = b""
            if not line:  # it ended (the room's child too, which no poll() here sees): the next kernel starts another
                cls._channel.close()
                cls._channel = None
                raise OSError("the fork server ended")
            answer = json.loads(line)
        if "pid" not in answer:
            raise OSError(answer["error"])
        return answer["pid"]


class ForkedKernel:
    """What LocalProvisioner asks of a Popen, for a kernel the fork server made (not this process's child)."""

    stdin = stdout = stderr = None

    def __init__(self, pid: int):
        self.pid = pid
        self._process = psutil.Process(pid)  # remembers the start time: a reused pid is not this kernel

    def poll(self) -> int | None:
        try:
            alive = self._process.is_running() and self._process.status() != psutil.STATUS_ZOMBIE
        except psutil.Error:
            alive = False
        return None if alive else 0  # its exit code is the fork server's to read

    def wait(self, timeout: float | None = None) -> int:
        try:
            self._process.wait(timeout)
        except psutil.NoSuchProcess:
            pass
        return 0

    def send_signal(self, signum: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, signum)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)


class ForkingProvisioner(LocalProvisioner):
    """LocalProvisioner whose IPython kernels are forked from the learner's fork server."""

    async def launch_kernel(self, cmd: list[str], **kwargs):
        if cmd[1:3] != LAUNCHER or Path(cmd[0]).resolve() != Path(sys.executable).resolve():
            return await super().launch_kernel(cmd, **kwargs)
        cwd = str(kwargs.get("cwd") or Path.cwd())
        env = {**(kwargs.get("env") or os.environ)}
        try:  # in a thread: the first call waits for the fork server's imports, the server keeps serving
            pid = await asyncio.to_thread(ForkServer.fork, cmd, cwd, env)
        except (OSError, ValueError) as error:
            self.log.warning("the fork server could not start a kernel (%s): started as usual", error)
            return await super().launch_kernel(cmd, **kwargs)
        self.process = ForkedKernel(pid)
        self.pid, self.pgid, self.cwd = pid, pid, cwd
        return self.connection_info


def register() -> None:
    """Make ForkingProvisioner the server's default (called from hub/singleuser_config.py), forking from the
    room's child the hub passed, if it did."""
    fd = os.environ.pop(ROOM_FD, None)  # popped: the kernels' environment is the server's
    if fd is not None:
        ForkServer._room_fd = int(fd)
        os.set_inheritable(ForkServer._room_fd, False)  # no other process the server starts holds it
    KernelProvisionerFactory.provisioners[NAME] = EntryPoint(NAME, f"{__name__}:ForkingProvisioner",
                                                             KernelProvisionerFactory.GROUP_NAME)


if __name__ == "__main__":
    sys.path.pop(0)  # this file's folder (hub/): no kernel should import the room's modules by accident
    if sys.argv[1] == "--room":
        serve_room(int(sys.argv[2]))
    else:
        serve(int(sys.argv[1]), preload())
