# Each learner's Jupyter server loads this file (RoomSpawner passes --config): it runs as the learner.
#
# Kernels talk to the server over IPC (Unix sockets) in the learner's runtime folder,
# ~/.local/share/jupyter/runtime (mode 700, in a mode-700 home), instead of TCP ports on 127.0.0.1
# that any local user could connect a zmq SUB socket to and read the kernel's code and outputs live
# (message signing stops injection, not reading). The folder's mode is the guard (tests/hub).
#
# Kernels forked from the learner's fork server (hub/fork_kernels.py), a process of theirs holding torch and the
# lab: the room's fork server forked it as them and the hub passed its socket ($LAB_FORK_FD), or, without one,
# this server starts it. A notebook shares those pages instead of holding its own copy.
#
# And at most $LAB_MAX_KERNELS kernels at once (room.json's limits; hub/kernel_cap.py): one more is
# refused with a message that says what to do. The learner's cgroup bounds what they hold whatever
# starts it.
import importlib.util
import sys
from pathlib import Path

c = get_config()  # noqa: F821 -- defined by the server when it loads this file

c.KernelManager.transport = "ipc"


def _beside(name: str):
    """hub/ is not a package the learner's server can import: its modules are loaded from beside this file."""
    spec = importlib.util.spec_from_file_location(f"lab_{name}", Path(__file__).with_name(f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


c.ServerApp.kernel_manager_class = _beside("kernel_cap").CappedKernelManager
_beside("fork_kernels").register()
c.KernelProvisionerFactory.default_provisioner_name = "lab-fork-provisioner"
# The language-server and Voila extensions serve nothing a learner's room uses: about 9 MB a learner less
c.ServerApp.jpserver_extensions = {"jupyter_lsp": False, "voila.server_extension": False}
