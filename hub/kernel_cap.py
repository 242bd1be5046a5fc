"""At most a few kernels at once in one Jupyter server: each learner's server in the room (loaded by
hub/singleuser_config.py) and the projector view (present/serve.py, Voila, one kernel per page view).

One more is refused before it starts, with a message that says what to do: in JupyterLab a dialog
(HTTP 403 with a JSON message), in the projector view a page (HTTP 503). Starts under way count, so
ten requests at once start no more than the cap. The cap is $LAB_MAX_KERNELS, set by whoever starts
the server (the room's spawner from room.json's limits, present/serve.py from --max-kernels).
"""
from __future__ import annotations

import os

from jupyter_server.services.kernels.kernelmanager import AsyncMappingKernelManager
from tornado import web

CAP_VARIABLE = "LAB_MAX_KERNELS"


class CappedKernelManager(AsyncMappingKernelManager):
    """AsyncMappingKernelManager that refuses a new kernel once $LAB_MAX_KERNELS run or are starting."""

    status = 403
    advice = "Shut one down first (the Running panel on the left, or Kernel > Shut Down Kernel)."
    _starting = 0

    @property
    def cap(self) -> int:
        return int(os.environ.get(CAP_VARIABLE, "4"))

    async def start_kernel(self, *, kernel_id=None, path=None, **kwargs):
        if kernel_id is not None and kernel_id in self:  # a restart: not a new kernel
            return await super().start_kernel(kernel_id=kernel_id, path=path, **kwargs)
        if len(self.list_kernel_ids()) + self._starting >= self.cap:
            said = f"At most {self.cap} kernels run here at once. {self.advice}"
            raise web.HTTPError(self.status, said, reason=said)  # reason: the line an error page shows
        self._starting += 1
        try:
            return await super().start_kernel(kernel_id=kernel_id, path=path, **kwargs)
        finally:
            self._starting -= 1


class ProjectorKernelManager(CappedKernelManager):
    """The projector view's: each page view is a kernel; the projector's own tab keeps one."""

    status = 503
    advice = ("The projector view is open in that many tabs or windows already: close one (its kernel ends "
              "within a minute) and reload this page.")
