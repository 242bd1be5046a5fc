"""Whether processes a test started have ended. A process that has exited but that nobody has reaped
yet is a zombie: it runs nothing and holds no port or memory, so it counts as ended. (A worker whose
kernel was killed is re-parented to PID 1, which in a container need not reap it at once.)"""
from __future__ import annotations

import time

import psutil


def still_running(processes: list[psutil.Process], timeout_s: float) -> list[psutil.Process]:
    """Those of `processes` still running (not zombies) once all have ended or `timeout_s` has passed."""
    deadline = time.monotonic() + timeout_s
    while True:
        alive = [p for p in processes if _running(p)]
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.1)


def _running(process: psutil.Process) -> bool:
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
