"""Kernels forked from a warm parent: a learner's kernels share the pages of what every notebook imports.

Each Python kernel that imports torch holds about 120 MB of its own (torch's registrations and
modules), and about 70 MB more once an optimizer is made (torch imports torch._dynamo then): with
two notebooks open a learner held 600 MB (PSS, benchmarks/hub_room.py), 505 MB with forked kernels.
Here the learner's server starts one process of theirs, the fork server, which imports those modules
once and then forks each kernel: a kernel's pages stay shared with it until written (copy on write),
so a second notebook costs its own work, not another torch.

Loaded by hub/singleuser_config.py in each learner's server, so all of it runs as that learner:
the fork server is their process, started with a socket pair (no file or port another user could
reach), and it forks only their kernels. It ends when their server closes the pair (a kernel it
forked ends with it: ipykernel's parent poller), so nothing outlives the server. A kernel command
that is not `<this Python> -m ipykernel_launcher ...` starts as usual.
"""
from __future__ import annotations

import asyncio
import gc
import importlib
import json
import os
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


# --- the fork server: a process of the learner's, started by their server ------------------------
def serve(fd: int) -> None:
    """Import PRELOAD, then fork a kernel for each request read from the socket `fd` until it closes.

    A request is one JSON line {"argv", "cwd", "env"}; the answer one line {"pid"} or {"error"}."""
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
    """The learner's fork server, started on the first kernel; one per Jupyter server."""

    _lock = threading.Lock()
    _process: subprocess.Popen | None = None
    _channel = None

    @classmethod
    def fork(cls, argv: list[str], cwd: str, env: dict) -> int:
        """A kernel forked with `argv`, `cwd` and `env`: its pid (OSError if the fork server cannot)."""
        with cls._lock:
            if cls._process is None or cls._process.poll() is not None:
                ours, theirs = socket.socketpair()
                cls._process = subprocess.Popen([sys.executable, __file__, str(theirs.fileno())],
                                                pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL)
                theirs.close()
                cls._channel = ours.makefile("rwb", buffering=0)
            cls._channel.write(json.dumps({"argv": argv, "cwd": cwd, "env": env}).encode() + b"\n")
            answer = json.loads(cls._channel.readline() or b'{"error": "the fork server ended"}')
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
    """Make ForkingProvisioner the server's default (called from hub/singleuser_config.py)."""
    KernelProvisionerFactory.provisioners[NAME] = EntryPoint(NAME, f"{__name__}:ForkingProvisioner",
                                                             KernelProvisionerFactory.GROUP_NAME)


if __name__ == "__main__":
    sys.path.pop(0)  # this file's folder (hub/): no kernel should import the room's modules by accident
    serve(int(sys.argv[1]))
