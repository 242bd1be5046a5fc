# Each learner's Jupyter server loads this file (RoomSpawner passes --config): it runs as the learner.
#
# Kernels talk to the server over IPC (Unix sockets) in the learner's runtime folder,
# ~/.local/share/jupyter/runtime (mode 700, in a mode-700 home), instead of TCP ports on 127.0.0.1
# that any local user could connect a zmq SUB socket to and read the kernel's code and outputs live
# (message signing stops injection, not reading). The folder's mode is the guard (tests/hub).
#
# And at most $LAB_MAX_KERNELS kernels at once (room.json's limits; hub/kernel_cap.py): one more is
# refused with a message that says what to do. The learner's cgroup bounds what they hold whatever
# starts it.
import importlib.util
from pathlib import Path

c = get_config()  # noqa: F821 -- defined by the server when it loads this file

c.KernelManager.transport = "ipc"

# hub/ is not a package the learner's server can import: its kernel cap is loaded from beside this file
_spec = importlib.util.spec_from_file_location("lab_kernel_cap", Path(__file__).with_name("kernel_cap.py"))
_cap = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_cap)
c.ServerApp.kernel_manager_class = _cap.CappedKernelManager
