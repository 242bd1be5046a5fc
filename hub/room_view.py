"""The instructor's room view, a JupyterHub service at /services/room/ (admins only).

For each learner: the notebooks they opened, the checked exercises they passed, the last one they
tried and when; and the exercise the most learners are stuck on (tried, never passed). The page
polls `api/room` every few seconds and redraws its table: no reload.

Progress is read as the learner (hub/export.py's read_as_learner runs read_progress.py with their uid
and gid and no other group: a symlink they plant reaches only what they could read), so nothing a
learner owns changes owner or content. "Opened" is what their progress file names plus the notebooks
their server has had open since this view started (its sessions API, through the hub's token). The
page's two links download the instructor's record (hub/export.py): learners x exercises, and a
gradebook Canvas imports.
"""
from __future__ import annotations

import asyncio
import json
import os
import sys
from collections import Counter
from pathlib import Path
from urllib.parse import urlparse

from jupyterhub.services.auth import HubOAuthCallbackHandler, HubOAuthenticated
from jupyterhub.utils import url_path_join
from tornado import web
from tornado.httpclient import AsyncHTTPClient, HTTPRequest
from tornado.ioloop import IOLoop

from widgets.lessons.start_here.catalog import NOTEBOOKS

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout: this file runs as a service's script
from hub.export import exercise_rows, gradebook_csv, progress_csv, read_as_learner, read_room  # noqa: E402

HERE = Path(__file__).resolve().parent
PREFIX = os.environ.get("JUPYTERHUB_SERVICE_PREFIX", "/services/room/")
TOKEN = os.environ.get("JUPYTERHUB_API_TOKEN", "")
HUB_API = os.environ.get("JUPYTERHUB_API_URL", "http://127.0.0.1:8081/hub/api")
REFRESH_S = 3
_seen: dict[str, set[str]] = {}  # learner -> notebooks their server had open, since this view started


async def _hub(path: str) -> object:
    request = HTTPRequest(url_path_join(HUB_API, path), headers={"Authorization": f"token {TOKEN}"}, request_timeout=10)
    return json.loads((await AsyncHTTPClient().fetch(request)).body)


# A notebook by its title, as the progress records name it (so one notebook is one entry, not two).
TITLES = {Path(entry.path).name: entry.title for entry in NOTEBOOKS}


async def _open_notebooks(user: dict) -> list[str]:
    """Titles of the notebooks open in the learner's server now (empty if it is not running or does not answer)."""
    server = user.get("servers", {}).get("")
    if not server or not server.get("ready"):
        return []
    base = os.environ.get("JUPYTERHUB_BASE_URL_INTERNAL") or _proxy_base()
    request = HTTPRequest(url_path_join(base, server["url"], "api/sessions"),
                          headers={"Authorization": f"token {TOKEN}"}, request_timeout=5)
    try:
        sessions = json.loads((await AsyncHTTPClient().fetch(request)).body)
    except Exception:  # noqa: BLE001 -- a server starting or stopping: nothing open
        return []
    return [TITLES.get(name, name) for name in (s["path"].rsplit("/", 1)[-1] for s in sessions
                                                 if s.get("type") == "notebook")]


def _proxy_base() -> str:
    """The proxy's address as the hub sees it (the learners' port), from the hub's public URL."""
    url = urlparse(os.environ.get("LAB_HUB_PUBLIC_URL", "http://127.0.0.1:8000"))
    return f"{url.scheme}://{url.netloc}"


def summarize(name: str, records: list[dict], open_now: list[str]) -> dict:
    """One learner's row: opened notebooks, passed exercises, last tried, stuck on (tried, not passed)."""
    seen = _seen.setdefault(name, set())
    seen.update(open_now)
    passed = sorted({f"{r['notebook']}: {r['exercise']}" for r in records if r["result"] == "correct"})
    tried = {f"{r['notebook']}: {r['exercise']}" for r in records}
    last = records[-1] if records else None
    return {
        "name": name,
        "opened": sorted(seen | {r["notebook"] for r in records}),
        "open_now": sorted(open_now),
        "passed": passed,
        "stuck": sorted(tried - set(passed)),
        "last": None if last is None else {"exercise": f"{last['notebook']}: {last['exercise']}",
                                           "result": last["result"], "time": last["time"]},
    }


async def _learners() -> list[dict]:
    """The hub's learners (not the instructor, not services), by name."""
    return sorted((u for u in await _hub("users") if not u.get("admin") and u.get("kind", "user") == "user"),
                  key=lambda u: u["name"])


async def room() -> dict:
    learners = await _learners()
    progress = await asyncio.gather(*(read_as_learner(u["name"]) for u in learners))
    open_now = await asyncio.gather(*(_open_notebooks(u) for u in learners))
    rows = []
    for user, found, now in zip(learners, progress, open_now):
        row = summarize(user["name"], found["records"], now)
        row["server"] = "running" if user.get("servers", {}).get("", {}).get("ready") else "stopped"
        row["problem"] = found["problem"]
        rows.append(row)
    stuck = Counter(e for row in rows for e in row["stuck"])
    top = stuck.most_common(1)
    return {"learners": rows, "most_stuck": {"exercise": top[0][0], "learners": top[0][1]} if top else None,
            "refresh_s": REFRESH_S}


class AdminOnly(HubOAuthenticated):
    def admin(self) -> dict:
        user = self.get_current_user()
        if not user.get("admin"):
            raise web.HTTPError(403, "the room view is for the hub's admins (the instructor)")
        return user


class PageHandler(AdminOnly, web.RequestHandler):
    @web.authenticated
    def get(self):
        self.admin()
        self.set_header("Content-Type", "text/html; charset=utf-8")
        page = (HERE / "room_view.html").read_text().replace("{{refresh_ms}}", str(REFRESH_S * 1000))
        # a fetch() authenticated by cookie must carry the xsrf token (JupyterHub refuses it otherwise)
        self.write(page.replace("{{xsrf}}", self.xsrf_token.decode()))


class ApiHandler(AdminOnly, web.RequestHandler):
    @web.authenticated
    async def get(self):
        self.admin()
        self.set_header("Cache-Control", "no-store")
        self.write(await room())


class ExportHandler(AdminOnly, web.RequestHandler):
    """The instructor's record as a download: `progress.csv` or `gradebook.csv` (hub/export.py)."""

    @web.authenticated
    async def get(self, kind: str):
        self.admin()
        rows = exercise_rows(await read_room([u["name"] for u in await _learners()]))
        self.set_header("Content-Type", "text/csv; charset=utf-8")
        self.set_header("Content-Disposition", f'attachment; filename="room-{kind}.csv"')
        self.set_header("Cache-Control", "no-store")
        self.write(progress_csv(rows) if kind == "progress" else gradebook_csv(rows))


def main() -> None:
    app = web.Application([
        (PREFIX, PageHandler),
        (url_path_join(PREFIX, "api/room"), ApiHandler),
        (url_path_join(PREFIX, r"export/(progress|gradebook)\.csv"), ExportHandler),
        (url_path_join(PREFIX, "oauth_callback"), HubOAuthCallbackHandler),
    ], cookie_secret=os.urandom(32))
    url = urlparse(os.environ["JUPYTERHUB_SERVICE_URL"])
    app.listen(url.port, url.hostname)
    IOLoop.current().start()


if __name__ == "__main__":
    main()
