# Each learner's Jupyter server loads this file (RoomSpawner passes --config): it runs as the learner.
#
# Kernels talk to the server over IPC (Unix sockets) in the learner's runtime folder,
# ~/.local/share/jupyter/runtime (mode 700, in a mode-700 home), instead of TCP ports on 127.0.0.1
# that any local user could connect a zmq SUB socket to and read the kernel's code and outputs live
# (message signing stops injection, not reading). The folder's mode is the guard (tests/hub).
#
# And at most $LAB_HUB_KERNELS kernels at once (room.json's limits): one more is refused with a
# message that says what to do. The learner's cgroup bounds what they hold whatever starts it.
import os

from jupyter_server.services.kernels.kernelmanager import AsyncMappingKernelManager
from tornado import web

c = get_config()  # noqa: F821 -- defined by the server when it loads this file

c.KernelManager.transport = "ipc"

CAP = int(os.environ.get("LAB_HUB_KERNELS", "4"))


class CappedKernelManager(AsyncMappingKernelManager):
    """A MappingKernelManager that refuses a new kernel past CAP (starts under way counted too)."""

    _starting = 0

    async def start_kernel(self, *, kernel_id=None, path=None, **kwargs):
        if kernel_id is None or kernel_id not in self:
            if len(self.list_kernel_ids()) + self._starting >= CAP:
                raise web.HTTPError(403, f"This room runs at most {CAP} kernels per learner at once. Shut one down "
                                         "first (the Running panel on the left, or Kernel > Shut Down Kernel).")
            self._starting += 1
            try:
                return await super().start_kernel(kernel_id=kernel_id, path=path, **kwargs)
            finally:
                self._starting -= 1
        return await super().start_kernel(kernel_id=kernel_id, path=path, **kwargs)


c.ServerApp.kernel_manager_class = CappedKernelManager
