# The room's JupyterHub: started by `make hub` (tools/hub.py), which sets the LAB_HUB_* variables.
# Every port is on 127.0.0.1 except the one the learners use, on the address the instructor chose.
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # the checkout: a config file is not imported as part of a package

from hub.room import NOTEBOOKS_FOLDER, START_HERE, RoomSpawner, WorkshopAuthenticator, copy_notebooks, load_room  # noqa: E402

c = get_config()  # noqa: F821 -- defined by JupyterHub when it loads this file

STATE = Path(os.environ["LAB_HUB_STATE"])  # mode 700, outside the checkout: room.json, database, secret
VENV_BIN = Path(sys.executable).parent  # the lab's environment: every learner must be able to read it
room = load_room(STATE)

# --- addresses: the learners' one port; the hub, the proxy's API and the room view on loopback
c.JupyterHub.bind_url = f"http://{os.environ['LAB_HUB_IP']}:{os.environ['LAB_HUB_PORT']}"
c.JupyterHub.hub_bind_url = f"http://127.0.0.1:{os.environ['LAB_HUB_HUB_PORT']}"
c.ConfigurableHTTPProxy.api_url = f"http://127.0.0.1:{os.environ['LAB_HUB_API_PORT']}"
c.ConfigurableHTTPProxy.command = [str(HERE / "node_modules" / ".bin" / "configurable-http-proxy")]
c.ConfigurableHTTPProxy.pid_file = str(STATE / "proxy.pid")
c.ConfigurableHTTPProxy.log_level = "warn"

# --- state, mode 600 (tools/hub.py runs the hub with umask 077), outside the checkout
c.JupyterHub.db_url = f"sqlite:///{STATE / 'jupyterhub.sqlite'}"
c.JupyterHub.cookie_secret_file = str(STATE / "jupyterhub_cookie_secret")
c.JupyterHub.pid_file = str(STATE / "jupyterhub.pid")
c.JupyterHub.cleanup_servers = True  # stopping the hub stops every learner's server (make hub-stop)
c.JupyterHub.cleanup_proxy = True

# --- who gets in: the room list and one shared password; the instructor is the only admin
c.JupyterHub.authenticator_class = WorkshopAuthenticator
c.WorkshopAuthenticator.state_dir = str(STATE)
c.Authenticator.allowed_users = set(room["learners"]) | {room["instructor"]}
c.Authenticator.admin_users = {room["instructor"]}



def landing(handler):
    """After login: the instructor to the room view, a learner to their own server (start-here)."""
    user = handler.current_user
    return "/services/room/" if user is not None and user.admin else (user.url if user is not None else "/hub/login")


c.JupyterHub.default_url = landing

# --- each learner a system user, their own copy of the notebooks, landing on start-here
c.JupyterHub.spawner_class = RoomSpawner
c.Spawner.cmd = [str(VENV_BIN / "jupyterhub-singleuser")]
c.Spawner.default_url = f"/lab/tree/{NOTEBOOKS_FOLDER}/{START_HERE}"
c.Spawner.pre_spawn_hook = copy_notebooks
# Each learner's limits (memory, processes, kernels) come from room.json at each spawn: RoomSpawner
# enforces them with a cgroup per learner where the machine has one (hub/limits.py).
c.RoomSpawner.state_dir = str(STATE)
c.Spawner.environment = {
    "PATH": f"{VENV_BIN}:/usr/local/bin:/usr/bin:/bin",
    # glibc reserves up to 8 x cores malloc arenas of 64 MB of address space each: on a big machine
    # that alone would pass the per-process RLIMIT_AS; a few arenas cost nothing at a notebook's scale
    "MALLOC_ARENA_MAX": "4",
}
c.Spawner.http_timeout = 120  # a busy machine starting ten servers at once
c.Spawner.start_timeout = 120
c.JupyterHub.concurrent_spawn_limit = 0  # a room logs in at once; the machine is sized for it

# --- services: the idle culler and the instructor's room view
idle = int(room.get("idle_timeout_s", 3600))
c.JupyterHub.services = [
    {"name": "idle-culler", "environment": {"LAB_HUB_STATE": str(STATE)},  # the mark make hub-stop finds it by
     "command": [sys.executable, "-m", "jupyterhub_idle_culler", f"--timeout={idle}", "--cull-every=60"]},
    {"name": "room", "url": f"http://127.0.0.1:{os.environ['LAB_HUB_ROOM_PORT']}",
     "command": [sys.executable, str(HERE / "room_view.py")], "oauth_no_confirm": True,
     "environment": {"LAB_HUB_STATE": str(STATE), "PATH": os.environ.get("PATH", ""),
                     "LAB_HUB_PUBLIC_URL": c.JupyterHub.bind_url.replace("://0.0.0.0:", "://127.0.0.1:")}},
]
c.JupyterHub.load_roles = [
    {"name": "idle-culler", "services": ["idle-culler"],
     "scopes": ["list:users", "read:users:activity", "read:servers", "delete:servers"]},
    # the room view lists the learners and asks their servers which notebooks are open; it can
    # neither start nor stop a server, nor change a user
    {"name": "room-view", "services": ["room"], "scopes": ["list:users", "read:users", "read:servers", "access:servers"]},
]
