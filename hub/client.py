"""A learner, over HTTP: log in to the hub, spawn, and run code in a kernel of their own server.

What the simulated room (benchmarks/hub_room.py) and the hub tests (tests/hub/) drive the room
with: the same requests a browser makes (the login form with its _xsrf, the hub's REST API with the
learner's own token, the server's kernel websocket), nothing the hub gives a script for free.
"""
from __future__ import annotations

import json
import math
import random
import time
import uuid

import requests
import websocket

NOTEBOOKS = "gradient-accumulation-lab"
# the controls a learner moves, by widget model
SLIDERS = {"IntSliderModel", "FloatSliderModel", "FloatLogSliderModel"}
CHOICES = {"DropdownModel", "ToggleButtonsModel", "RadioButtonsModel", "SelectionSliderModel"}


def new_setting(state: dict, rng: random.Random) -> dict | None:
    """Another value for a control a learner moves (None: not one, or nothing else to choose)."""
    kind = state.get("_model_name")
    if state.get("disabled"):
        return None
    if kind in SLIDERS:
        lo, hi, step = state["min"], state["max"], state.get("step") or 1
        if kind == "FloatLogSliderModel":
            values = [state["base"] ** (lo + i * step) for i in range(int(round((hi - lo) / step)) + 1)]
        else:
            values = [lo + i * step for i in range(int(round((hi - lo) / step)) + 1)]
        values = [v for v in values if not math.isclose(v, state["value"])]
        return {"value": rng.choice(values)} if values else None
    if kind in CHOICES:
        others = [i for i in range(len(state.get("_options_labels", []))) if i != state.get("index")]
        return {"index": rng.choice(others)} if others else None
    if kind == "CheckboxModel":
        return {"value": not state["value"]}
    return None


class HubClient:
    """One person at the hub `base` (http://127.0.0.1:8000): a cookie session, then a token."""

    def __init__(self, base: str, name: str):
        self.base, self.name = base.rstrip("/"), name
        self.http = requests.Session()
        self.token: str | None = None

    # --- the hub ---------------------------------------------------------------------------
    def login(self, password: str) -> bool:
        """The login form, as a browser posts it; True if the hub let this person in."""
        self.http.get(f"{self.base}/hub/login", timeout=30)
        form = {"username": self.name, "password": password, "_xsrf": self.http.cookies.get("_xsrf", "")}
        response = self.http.post(f"{self.base}/hub/login", data=form, allow_redirects=False, timeout=60)
        return response.status_code == 302 and "jupyterhub-session-id" in self.http.cookies

    def new_token(self) -> str:
        """A token of this person's own (what the hub's token page makes), asked for with their cookie."""
        response = self.http.post(f"{self.base}/hub/api/users/{self.name}/tokens", json={"note": "room", "expires_in": 7200},
                                  headers={"X-XSRFToken": self.http.cookies.get("_xsrf", "")}, timeout=30)
        response.raise_for_status()
        self.token = response.json()["token"]
        return self.token

    def hub_api(self, method: str, path: str, **kw) -> requests.Response:
        return requests.request(method, f"{self.base}/hub/api/{path}", headers=self._auth(), timeout=30, **kw)

    def spawn(self, timeout: float = 240) -> float:
        """Start this person's server and wait until it is ready; the seconds it took."""
        t0 = time.monotonic()
        response = self.hub_api("POST", f"users/{self.name}/server")
        if response.status_code not in (201, 202, 400):  # 400: already running
            raise RuntimeError(f"spawn of {self.name}: {response.status_code} {response.text[:300]}")
        while time.monotonic() - t0 < timeout:
            server = self.hub_api("GET", f"users/{self.name}").json().get("servers", {}).get("")
            if server and server.get("ready"):
                return time.monotonic() - t0
            time.sleep(0.5)
        raise TimeoutError(f"the server of {self.name} was not ready in {timeout:.0f} s")

    # --- their server --------------------------------------------------------------------------
    def server_api(self, method: str, path: str, user: str | None = None, timeout: float = 60,
                   **kw) -> requests.Response:
        """The Jupyter server API of `user` (default: this person), with this person's token."""
        return requests.request(method, f"{self.base}/user/{user or self.name}/api/{path}", headers=self._auth(),
                                timeout=timeout, **kw)

    def open_notebook(self, path: str) -> tuple[str, str]:
        """Open a notebook as JupyterLab does (a session on it: the kernel runs in its folder); (session, kernel) ids."""
        # as long as JupyterLab waits (it sets no limit): the learner's first kernel waits for their fork server's
        # imports, and forty of them start at once in a room that logs in together
        response = self.server_api("POST", "sessions", timeout=600,
                                   json={"path": path, "type": "notebook", "name": path.rsplit("/", 1)[-1],
                                         "kernel": {"name": "python3"}})
        response.raise_for_status()
        session = response.json()
        return session["id"], session["kernel"]["id"]

    def close_session(self, session_id: str) -> None:
        self.server_api("DELETE", f"sessions/{session_id}")

    def run_notebook(self, path: str, timeout: float = 600) -> dict:
        """Open `path` (relative to their home), run its code cells in order; seconds and the first error."""
        cells = self.server_api("GET", f"contents/{path}").json()["content"]["cells"]
        session, kernel = self.open_notebook(path)
        t0 = time.monotonic()
        try:
            with Kernel(self, kernel) as k:
                for i, cell in enumerate(c for c in cells if c["cell_type"] == "code"):
                    result = k.execute(cell["source"], timeout=max(1.0, timeout - (time.monotonic() - t0)))
                    if result["error"]:
                        return {"seconds": round(time.monotonic() - t0, 2), "error": f"code cell {i}: {result['error']}"}
        finally:
            self.close_session(session)
        return {"seconds": round(time.monotonic() - t0, 2), "error": None}

    def _auth(self) -> dict:
        return {"Authorization": f"token {self.token}"} if self.token else {}


PROTOCOL = "v1.kernel.websocket.jupyter.org"  # what JupyterLab speaks: the server forwards frames unparsed


def frame(channel: str, msg: dict) -> bytes:
    """A kernel message as a v1 websocket frame: uint64 count and offsets (little-endian), the channel,
    then header, parent header, metadata and content as JSON (jupyter_server's serialize_msg_to_ws_v1)."""
    parts = [channel.encode()] + [json.dumps(msg[k]).encode() for k in ("header", "parent_header", "metadata", "content")]
    offsets = [8 * (len(parts) + 2)]
    for part in parts:
        offsets.append(offsets[-1] + len(part))
    return b"".join([len(offsets).to_bytes(8, "little"), *(o.to_bytes(8, "little") for o in offsets), *parts])


def parse_frame(data: bytes) -> dict:
    """A kernel message from a v1 websocket frame; its buffers (a widget's image) under "buffers"."""
    count = int.from_bytes(data[:8], "little")
    offsets = [int.from_bytes(data[8 * (i + 1):8 * (i + 2)], "little") for i in range(count)]
    parts = [data[offsets[i]:offsets[i + 1] if i + 1 < count else None] for i in range(count)]
    msg = dict(zip(("header", "parent_header", "metadata", "content"), (json.loads(p) for p in parts[1:5])))
    return {**msg, "channel": parts[0].decode(), "buffers": parts[5:]}


class Kernel:
    """A kernel's websocket (the Jupyter messaging protocol as JSON frames): execute code, read what it printed,
    and be a widget front end: `widgets` holds every widget model the kernel opened, `change` sets one."""

    def __init__(self, client: HubClient, kernel_id: str):
        ws_base = client.base.replace("http://", "ws://").replace("https://", "wss://")
        self.url = f"{ws_base}/user/{client.name}/api/kernels/{kernel_id}/channels"
        self.header = [f"Authorization: token {client.token}"]
        self.connect()
        self.session = uuid.uuid4().hex
        self.widgets: dict[str, dict] = {}  # comm id -> the model's state, as the kernel last said it
        self.shown: list[str] = []  # the widgets the notebook displayed (a cell's output), in order

    def connect(self) -> None:
        """(Again) a websocket to the kernel. A browser answers the server's pings all the time; this client
        only while it reads, so a socket left unread while the learner's other notebook runs may have been
        closed: the room reconnects before it changes settings (widget updates reach every connection)."""
        if getattr(self, "ws", None) is not None:
            self.ws.close()
        self.ws = websocket.create_connection(self.url, header=self.header, timeout=30, subprotocols=[PROTOCOL])
        if self.ws.getsubprotocol() != PROTOCOL:
            raise RuntimeError(f"the server did not take the {PROTOCOL} protocol JupyterLab speaks")

    def drain(self) -> None:
        """Read whatever has arrived (answering the server's pings meanwhile), without waiting."""
        self.ws.settimeout(0.001)
        try:
            while True:
                data = self.ws.recv()
                if not data:  # the server closed it
                    break
                self._keep(parse_frame(data))
        except (websocket.WebSocketTimeoutException, BlockingIOError):
            pass

    def _message(self, msg_type: str, content: dict, channel: str = "shell") -> str:
        msg_id = uuid.uuid4().hex
        self.ws.send_binary(frame(channel, {
            "header": {"msg_id": msg_id, "msg_type": msg_type, "session": self.session, "username": "",
                       "version": "5.3", "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())},
            "parent_header": {}, "metadata": {}, "content": content}))
        return msg_id

    def _receive(self, deadline: float, timeout: float) -> dict:
        """The next message; a widget's opening or state change is kept in `widgets` whoever caused it."""
        self.ws.settimeout(max(0.1, deadline - time.monotonic()))
        try:
            data = self.ws.recv()
        except websocket.WebSocketTimeoutException:
            raise TimeoutError(f"the kernel did not finish within {timeout:.0f} s") from None
        if not data:
            raise ConnectionError("the server closed the kernel's websocket")
        return self._keep(parse_frame(data))

    def _keep(self, msg: dict) -> dict:
        kind, content = msg["header"]["msg_type"], msg.get("content", {})
        if kind == "comm_open" and content.get("target_name") == "jupyter.widget":
            self.widgets[content["comm_id"]] = dict(content["data"].get("state", {}))
        elif kind == "comm_msg" and content.get("comm_id") in self.widgets:
            self.widgets[content["comm_id"]].update(content["data"].get("state", {}))
        elif kind == "comm_close":
            self.widgets.pop(content.get("comm_id"), None)
        elif kind in ("display_data", "execute_result"):
            view = content.get("data", {}).get("application/vnd.jupyter.widget-view+json")
            if view:
                self.shown.append(view["model_id"])
        return msg

    def on_page(self) -> list[str]:
        """The widgets a learner sees: those displayed and, inside them, their children (a box's rows, an
        accordion's panes), not a model the page never shows (a control kept for another readout)."""
        seen, todo = [], list(self.shown)
        while todo:
            comm = todo.pop(0)
            if comm in seen or comm not in self.widgets:
                continue
            seen.append(comm)
            todo += [child.removeprefix("IPY_MODEL_") for child in self.widgets[comm].get("children", [])]
        return seen

    def change(self, comm_id: str, state: dict, timeout: float = 60) -> dict:
        """Set widget `comm_id`'s `state` as a browser does; seconds until a picture (an Image's new value)
        came back for it (None if none did) and until the kernel was idle again."""
        t0 = time.monotonic()
        msg_id = self._message("comm_msg", {"comm_id": comm_id, "data": {"method": "update", "state": state,
                                                                        "buffer_paths": []}})
        self.widgets[comm_id].update(state)
        picture, deadline = None, t0 + timeout
        while True:
            msg = self._receive(deadline, timeout)
            if msg.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            kind, content = msg["header"]["msg_type"], msg["content"]
            if (picture is None and kind == "comm_msg" and ["value"] in content["data"].get("buffer_paths", [])
                    and self.widgets.get(content["comm_id"], {}).get("_model_name") == "ImageModel"):
                picture = time.monotonic() - t0  # a new PNG for an Image: the picture the learner waits for
            elif kind == "status" and content["execution_state"] == "idle":
                return {"picture_s": picture, "idle_s": time.monotonic() - t0}

    def __enter__(self) -> Kernel:
        return self

    def __exit__(self, *exc) -> None:
        self.ws.close()

    def execute(self, code: str, timeout: float = 120) -> dict:
        """Run `code`; {"stdout", "result", "error"} once the kernel is idle again (error: 'Name: value' or None)."""
        msg_id = self._message("execute_request", {"code": code, "silent": False, "store_history": True,
                                                   "user_expressions": {}, "allow_stdin": False, "stop_on_error": True})
        out = {"stdout": "", "result": None, "error": None}
        replied = idle = False
        deadline = time.monotonic() + timeout
        while not (replied and idle):
            msg = self._receive(deadline, timeout)
            if msg.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            kind, content = msg["header"]["msg_type"], msg["content"]
            if kind == "stream" and content.get("name") == "stdout":
                out["stdout"] += content["text"]
            elif kind == "execute_result":
                out["result"] = content["data"].get("text/plain")
            elif kind == "error":
                out["error"] = f"{content['ename']}: {content['evalue']}"
            elif kind == "status" and content["execution_state"] == "idle":
                idle = True
            elif kind == "execute_reply":
                replied = True
                if content.get("status") == "error" and not out["error"]:
                    out["error"] = f"{content.get('ename')}: {content.get('evalue')}"
        return out
