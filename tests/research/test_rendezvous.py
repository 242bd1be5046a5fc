"""The gloo workers' rendezvous is private: a file store in a mode-700 folder that no other user can
list, read or write and no other machine can reach (it has no port), deleted when the run ends and,
by its janitor, when the kernel that made it is killed. gloo's own links listen on 127.0.0.1 only.

Another user is `nobody` (uid 65534): that attempt runs when the tests run as root (CI, the hub's
machine); the folder's mode and owner are checked either way.
"""
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from widgets.research.ddp import private_rendezvous

NOBODY = 65534


def janitors(parent: psutil.Process) -> list[psutil.Process]:
    return [p for p in parent.children() if "lab-gloo-" in " ".join(p.cmdline())]


def as_nobody(code: str, *args: str) -> str:
    run = subprocess.run(["/usr/bin/python3", "-c", code, *args], user=NOBODY, group=NOBODY, extra_groups=[], cwd="/",
                         capture_output=True, text=True, timeout=60)
    return run.stdout.strip()


TRY_THE_FOLDER = """
import os, sys
folder = sys.argv[1]
for attempt in (lambda: os.listdir(folder), lambda: open(os.path.join(folder, "store"), "rb"),
                lambda: open(os.path.join(folder, "planted"), "wb")):
    try:
        attempt()
        print("allowed")
    except OSError as error:
        print(error.strerror)
"""


def test_the_folder_is_private_and_gone_when_the_run_ends():
    with private_rendezvous() as rendezvous:
        assert rendezvous.startswith("file://") and rendezvous.endswith("/store")
        folder = Path(rendezvous[len("file://"):]).parent
        assert folder.stat().st_mode & 0o777 == 0o700 and folder.stat().st_uid == os.geteuid()
        (janitor,) = janitors(psutil.Process())
        if os.geteuid() == 0:
            assert as_nobody(TRY_THE_FOLDER, str(folder)).split("\n") == ["Permission denied"] * 3
    assert not folder.exists()
    assert not janitor.is_running() or janitor.status() == psutil.STATUS_ZOMBIE


KERNEL = """
import time
from widgets.research.ddp import private_rendezvous
with private_rendezvous() as rendezvous:
    print(rendezvous, flush=True)
    time.sleep(120)
"""


def test_the_folder_is_deleted_when_its_kernel_is_killed():
    kernel = subprocess.Popen([sys.executable, "-c", KERNEL], stdout=subprocess.PIPE, text=True)
    try:
        folder = Path(kernel.stdout.readline().strip()[len("file://"):]).parent
        (janitor,) = janitors(psutil.Process(kernel.pid))
        assert folder.is_dir()
        kernel.send_signal(signal.SIGKILL)  # no finally runs: the janitor alone sees it (its stdin closes)
        kernel.wait()
        psutil.wait_procs([janitor], timeout=30)
        assert not janitor.is_running() and not folder.exists()
    finally:
        kernel.kill()
        kernel.wait()
        kernel.stdout.close()


LONG_RUN = """
from widgets.research.ddp import DDPConfig, run_ddp
run_ddp(DDPConfig(accumulation_steps=64, micro_batch_size=64, num_updates=100), timeout_s=600)
"""


def other_addresses() -> list[str]:
    """This machine's IPv4 addresses other than loopback."""
    return [a.address for addrs in psutil.net_if_addrs().values() for a in addrs
            if a.family == socket.AF_INET and not a.address.startswith("127.")]


def test_during_a_run_nothing_is_reachable_but_gloos_loopback_links(kernel_with_workers):
    """While two workers train: the store has no port; each worker listens on 127.0.0.1 only (not
    from another address of this machine); another user can neither list nor read the store."""
    kernel, workers = kernel_with_workers(LONG_RUN, joined=True)
    (janitor,) = janitors(psutil.Process(kernel.pid))
    folder = next(a for a in janitor.cmdline() if "lab-gloo-" in a)
    listening = [c.laddr for w in workers for c in w.net_connections(kind="inet") if c.status == psutil.CONN_LISTEN]
    listening += [c.laddr for c in psutil.Process(kernel.pid).net_connections(kind="inet") if c.status == psutil.CONN_LISTEN]
    assert listening and {addr.ip for addr in listening} == {"127.0.0.1"}, listening  # gloo's links, loopback only
    for address in other_addresses():
        for addr in listening:
            with socket.socket() as s, pytest.raises(ConnectionRefusedError):
                s.settimeout(5)
                s.connect((address, addr.port))
    if os.geteuid() == 0:
        assert as_nobody(TRY_THE_FOLDER, folder).split("\n") == ["Permission denied"] * 3
    assert all(w.is_running() for w in workers)
    kernel.send_signal(signal.SIGKILL)
    kernel.wait()
    _, alive = psutil.wait_procs([*workers, janitor], timeout=30)
    assert alive == [] and not Path(folder).exists()
