"""The room on JupyterHub (`make hub`; instructor/hub.md): config, authenticator, spawner, room view.

Not part of the learners' `widgets` package: the hub's own code, run by root (tools/hub.py) and by
JupyterHub (jupyterhub_config.py): the settings make hands over, checked (settings.py), each
learner's limits and what enforces them (limits.py), the kernel cap a learner's server and the
projector view share (kernel_cap.py), plus the HTTP client the simulated room and the tests drive it with.
"""
