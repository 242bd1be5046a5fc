"""A spawned worker that ends with its parent, asked for before the worker imports torch (seconds a killed kernel would leave it running)."""
from __future__ import annotations

import importlib
import os
import pickle
import signal
import sys
import threading
import time


def run_with_parent(parent_pid: int, from_main_thread: bool, target: str, payload: bytes, *args: object) -> None:
    """A spawned process's entry: end when `parent_pid` is no longer its parent, then run `target` ('module:function')
    on `args` and the keyword arguments pickled in `payload` (unpickling them is what imports torch)."""
    if from_main_thread and sys.platform.startswith("linux"):  # a SIGKILL at once; it fires when the starting
        import ctypes  # thread ends, so only the parent's main thread asks for it

        PR_SET_PDEATHSIG = 1
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)

    def watch():  # everywhere: a thread polls
        while os.getppid() == parent_pid:  # also true at once if the parent died before this line
            time.sleep(0.1)
        os._exit(3)  # no clean-up to wait for: whatever the worker was part of is gone with the parent
    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()
    module, _, name = target.partition(":")
    getattr(importlib.import_module(module), name)(*args, **pickle.loads(payload))
