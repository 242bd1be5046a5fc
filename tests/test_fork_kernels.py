"""Kernels forked from the learner's fork server (hub/fork_kernels.py), driven as a Jupyter server drives them:
they run code in their own folder and environment, share the preloaded pages, answer an interrupt, restart, shut
down, and nothing is left once the server's side closes."""
from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path

import psutil
import pytest

jupyter_client = pytest.importorskip("jupyter_client")
fork_kernels = pytest.importorskip("hub.fork_kernels")

pytestmark = pytest.mark.skipif(os.name != "posix", reason="the room's kernels are forked on Linux")


@pytest.fixture
def forking(tmp_path):
    """The fork provisioner as the default, as hub/singleuser_config.py makes it; its fork server stopped after."""
    from jupyter_client.provisioning import KernelProvisionerFactory

    fork_kernels.register()
    factory = KernelProvisionerFactory.instance()
    before = factory.default_provisioner_name
    factory.default_provisioner_name = fork_kernels.NAME
    yield tmp_path
    factory.default_provisioner_name = before
    server = fork_kernels.ForkServer._process
    if server is not None:
        fork_kernels.ForkServer._channel.close()
        server.wait(timeout=30)
    fork_kernels.ForkServer._process = fork_kernels.ForkServer._channel = None


def _run(client, code: str, timeout: float = 60) -> str:
    out = []
    reply = client.execute_interactive(code, timeout=timeout, output_hook=lambda m: out.append(
        m["content"].get("text", "")) if m["msg_type"] == "stream" else None)
    assert reply["content"]["status"] == "ok", reply["content"]
    return "".join(out)


def _start(folder: Path, **env):
    from jupyter_client.manager import AsyncKernelManager

    manager = AsyncKernelManager(kernel_name="python3")
    asyncio.run(manager.start_kernel(cwd=str(folder), env={**os.environ, **env}))
    client = manager.blocking_client()
    client.start_channels()
    client.wait_for_ready(timeout=120)
    return manager, client


def test_kernels_are_forked_share_pages_and_end(forking):
    (forking / "one").mkdir()
    (forking / "two").mkdir()
    kernels = [_start(forking / "one", LAB_TEST_MARK="1"), _start(forking / "two", LAB_TEST_MARK="2")]
    try:
        server = fork_kernels.ForkServer._process
        assert server is not None
        for (manager, client), n in zip(kernels, ("one", "two")):
            assert isinstance(manager.provisioner, fork_kernels.ForkingProvisioner)
            assert psutil.Process(manager.provisioner.pid).ppid() == server.pid
            said = _run(client, "import os, sys, random, matplotlib; print(os.getcwd(), os.environ['LAB_TEST_MARK'], "
                                "sys.path[0] == os.getcwd(), 'widgets' in sys.modules, matplotlib.get_backend())")
            folder, mark, first, preloaded, backend = said.split()
            assert (folder, mark, first, preloaded) == (str(forking / n), {"one": "1", "two": "2"}[n], "True", "True")
            assert backend == "module://matplotlib_inline.backend_inline"  # as in a kernel started alone
        draws = [_run(c, "print(random.random())") for _, c in kernels]
        assert draws[0] != draws[1]  # each kernel its own seed, not its parent's
        # copy on write: most of what a kernel holds is shared with its parent (torch, the lab)
        for manager, _ in kernels:
            memory = psutil.Process(manager.provisioner.pid).memory_full_info()
            assert memory.uss < memory.rss / 2, memory

        manager, client = kernels[0]
        client.execute("import time; time.sleep(60)")
        time.sleep(1)
        asyncio.run(manager.interrupt_kernel())
        reply = client.get_shell_msg(timeout=30)
        assert reply["content"]["status"] == "error" and reply["content"]["ename"] == "KeyboardInterrupt"

        old = manager.provisioner.pid
        asyncio.run(manager.restart_kernel(now=True))
        client.wait_for_ready(timeout=120)
        assert manager.provisioner.pid != old and not psutil.pid_exists(old)
        assert _run(client, "print(1 + 1)").strip() == "2"
    finally:
        pids = [m.provisioner.pid for m, _ in kernels if m.provisioner]
        for manager, client in kernels:
            client.stop_channels()
            asyncio.run(manager.shutdown_kernel(now=False))
    for pid in pids:
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


def test_the_fork_server_and_its_kernels_end_with_the_server(forking):
    manager, client = _start(forking)
    kernel = manager.provisioner.pid
    server = fork_kernels.ForkServer._process
    client.stop_channels()
    fork_kernels.ForkServer._channel.close()  # what the learner's server ending does
    server.wait(timeout=30)
    deadline = time.monotonic() + 30
    while psutil.pid_exists(kernel) and time.monotonic() < deadline:  # ipykernel's parent poller: ~1 s
        time.sleep(0.2)
    assert not psutil.pid_exists(kernel)


def test_a_room_fork_server_that_ended_is_replaced_by_one_of_the_servers_own(forking):
    """The pair the hub passed leads nowhere once the room's child ended: that kernel starts as usual (OSError),
    and the next is forked by a fork server this server starts."""
    import socket

    ours, theirs = socket.socketpair()
    theirs.close()  # the room's child ended
    fork_kernels.ForkServer._room_fd = ours.detach()
    with pytest.raises(OSError, match="the fork server ended"):
        fork_kernels.ForkServer.fork(["python"], "/", {})
    assert fork_kernels.ForkServer._channel is None and fork_kernels.ForkServer._process is None
    manager, client = _start(forking)
    try:
        assert fork_kernels.ForkServer._process is not None
        assert psutil.Process(manager.provisioner.pid).ppid() == fork_kernels.ForkServer._process.pid
    finally:
        client.stop_channels()
        asyncio.run(manager.shutdown_kernel(now=True))


def test_other_kernel_commands_start_as_usual(forking):
    provisioner = fork_kernels.ForkingProvisioner.__new__(fork_kernels.ForkingProvisioner)
    called = []

    async def plain(self, cmd, **kwargs):
        called.append(cmd)

    original = fork_kernels.LocalProvisioner.launch_kernel
    fork_kernels.LocalProvisioner.launch_kernel = plain
    try:
        asyncio.run(provisioner.launch_kernel(["/usr/bin/python3", "-m", "other_kernel", "-f", "x.json"]))
    finally:
        fork_kernels.LocalProvisioner.launch_kernel = original
    assert called and fork_kernels.ForkServer._process is None
    assert signal.SIGINT  # (the signal module is the provisioner's: used above via interrupt_kernel)


def test_a_preload_that_starts_a_thread_is_refused(tmp_path):
    """A module that starts a thread at import (as a torch operation starts torch's pool) makes forking unsafe:
    the fork server answers every request with an error, and the provisioner then starts kernels as usual."""
    import json
    import socket
    import subprocess
    import sys

    (tmp_path / "starts_a_thread.py").write_text("import threading, time\n"
                                                 "threading.Thread(target=time.sleep, args=(60,), daemon=True).start()\n")
    ours, theirs = socket.socketpair()
    code = ("import sys; sys.path.insert(0, sys.argv[2]); import hub.fork_kernels as f; "
            "f.PRELOAD = ('starts_a_thread',); f.serve(int(sys.argv[1]), f.preload())")
    server = subprocess.Popen([sys.executable, "-c", code, str(theirs.fileno()), str(tmp_path)],
                              pass_fds=[theirs.fileno()], cwd=Path(__file__).resolve().parents[1])
    theirs.close()
    channel = ours.makefile("rwb", buffering=0)
    ours.close()  # the file holds the socket until it is closed too
    try:
        channel.write(json.dumps({"argv": [], "cwd": "/", "env": {}}).encode() + b"\n")
        answer = json.loads(channel.readline())
        assert "pid" not in answer and "forking it is unsafe" in answer["error"]
    finally:
        channel.close()
        server.wait(timeout=30)
