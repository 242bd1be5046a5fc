"""The room's isolation and security, over HTTP and from inside a kernel; the room view.

One hub for the session (tests/hub/support.py, started as `make hub` starts it) with two learners,
`a` and `b`, and an instructor, all throw-away system users; test_room_stop.py stops it at the end.
"""
from __future__ import annotations

import json
import pwd
import stat
import subprocess
from pathlib import Path

import psutil
import pytest

from hub.client import NOTEBOOKS, HubClient
from tests.hub.support import ARTIFACTS, CHECK, MEM_LIMIT, ROOT, TOOL, in_kernel


# --- who gets in ---------------------------------------------------------------------------------

def test_wrong_and_empty_passwords_are_refused(room):
    a, teacher = room.names["a"], room.names["teacher"]
    for name, password in [(a, "not-the-room-password"), (a, ""), (a, room.instructor_password),
                           (teacher, room.room_password), (teacher, ""), ("nobodyhere", room.room_password)]:
        assert not HubClient(room.url, name).login(password), (name, "let in with a wrong or empty password")
    assert HubClient(room.url, a).login(room.room_password)
    assert HubClient(room.url, teacher).login(room.instructor_password)


def test_a_second_start_finds_the_running_hub(room):
    again = subprocess.run([*TOOL, "--state", str(room.state), "start"], capture_output=True, text=True, timeout=60)
    assert again.returncode == 0, again.stderr
    assert f"already running: {room.url}" in again.stdout and str(room.info["pid"]) in again.stdout


def test_state_is_private_and_outside_the_checkout(room):
    assert ROOT not in room.state.parents
    assert stat.S_IMODE(room.state.stat().st_mode) == 0o700
    for name in ("room.json", "jupyterhub.sqlite", "jupyterhub_cookie_secret", "hub.json"):
        assert stat.S_IMODE((room.state / name).stat().st_mode) == 0o600, name


def test_nothing_listens_beyond_the_chosen_address(room):
    pids = {p.pid for p in room.processes()}
    listening = [c for c in psutil.net_connections(kind="inet") if c.status == psutil.CONN_LISTEN and c.pid in pids]
    assert len(listening) >= 5  # proxy (public, API), hub, room view, two learners' servers
    assert {c.laddr.ip for c in listening} == {"127.0.0.1"}, listening


# --- isolation -----------------------------------------------------------------------------------

def test_each_learner_lands_on_start_here_in_a_copy_of_their_own(room):
    a = room.learner("a")
    landing = a.http.get(f"{room.url}/user/{a.name}/", timeout=60)
    assert landing.url.endswith(f"/user/{a.name}/lab/tree/{NOTEBOOKS}/00_start_here.ipynb"), landing.url
    home = Path(pwd.getpwnam(a.name).pw_dir)
    assert stat.S_IMODE(home.stat().st_mode) == 0o700
    copy = home / NOTEBOOKS / "00_start_here.ipynb"
    assert copy.stat().st_uid == pwd.getpwnam(a.name).pw_uid
    assert copy.read_bytes() == (ROOT / "notebooks" / "00_start_here.ipynb").read_bytes()


def test_a_learner_cannot_open_another_learners_server_over_http(room):
    a, b = room.learner("a"), room.learner("b")
    for path in ("contents", f"contents/{NOTEBOOKS}", "sessions", "kernels"):
        assert a.server_api("GET", path, user=b.name).status_code in (403, 404), path  # with a's token
        assert b.server_api("GET", path).status_code == 200, path  # b's own works
    page = a.http.get(f"{room.url}/user/{b.name}/lab", timeout=60)  # with a's cookie, following redirects
    assert page.status_code in (403, 404) and b.name + "/lab" not in page.url.split("/hub/")[0]
    progress = a.http.get(f"{room.url}/user/{b.name}/files/.gradient-accumulation-lab/progress.json", timeout=60)
    assert progress.status_code in (403, 404)


def test_a_learners_token_cannot_use_the_admin_api(room):
    a, b = room.learner("a"), room.names["b"]
    for method, path in [("GET", "users"), ("GET", f"users/{b}"), ("POST", f"users/{b}/server"),
                         ("DELETE", f"users/{b}/server"), ("POST", f"users/{b}/tokens"), ("POST", "users/newcomer"),
                         ("PATCH", f"users/{a.name}"), ("GET", "proxy"), ("POST", "shutdown"), ("GET", "services")]:
        response = a.hub_api(method, path, json={"admin": True} if method == "PATCH" else None)
        assert response.status_code in (403, 404), (method, path, response.status_code)
    assert not a.hub_api("GET", f"users/{a.name}").json().get("admin")


def test_from_inside_a_kernel_another_learners_files_and_server_are_out_of_reach(room):
    a, b = room.learner("a"), room.learner("b")
    b_home = pwd.getpwnam(b.name).pw_dir
    assert Path(b_home, ".gradient-accumulation-lab", "progress.json").exists()
    code = f"""
import json, os, urllib.request, urllib.error
found = {{}}
for path in [{b_home!r}, {b_home + '/.gradient-accumulation-lab/progress.json'!r},
             {b_home + '/' + NOTEBOOKS + '/00_start_here.ipynb'!r}, {str(room.state / 'room.json')!r},
             {str(room.state / 'jupyterhub.sqlite')!r}]:
    try:
        os.listdir(path) if os.path.isdir(path) else open(path, 'rb').read(1)
        found[path] = 'read'
    except PermissionError:
        found[path] = 'denied'
ports = sorted({{int(line.split()[1].split(':')[1], 16) for line in open('/proc/net/tcp').read().splitlines()[1:]
                if line.split()[3] == '0A'}})  # every listening port on this machine
statuses = set()
for port in ports:
    request = urllib.request.Request(f'http://127.0.0.1:{{port}}/user/{b.name}/api/contents',
                                     headers={{'Authorization': 'token ' + os.environ['JUPYTERHUB_API_TOKEN']}})
    try:
        body = urllib.request.urlopen(request, timeout=3).read()
        # b's folder listed: a's token opened b's server (another server here may answer 200 to any path)
        statuses.add("b's files" if {NOTEBOOKS!r}.encode() in body else 200)
    except urllib.error.HTTPError as error:
        statuses.add(error.code)
    except Exception:
        statuses.add('no answer')
print(json.dumps({{'files': found, 'statuses': sorted(map(str, statuses)), 'ports': len(ports)}}))
"""
    result = in_kernel(a, code)
    assert result["error"] is None, result
    seen = json.loads(result["stdout"])
    assert set(seen["files"].values()) == {"denied"}, seen["files"]
    assert "b's files" not in seen["statuses"] and seen["ports"] >= 5, seen


def test_the_memory_limit_holds_in_a_learners_kernel(room):
    code = ("import resource\nprint(resource.getrlimit(resource.RLIMIT_AS)[0])\n"
            "try:\n    hog = bytearray(3 * 2**30)\n    print('allocated')\nexcept MemoryError:\n    print('MemoryError')\n")
    result = in_kernel(room.learner("a"), code)
    assert result["stdout"].split() == [str(MEM_LIMIT), "MemoryError"], result
    assert in_kernel(room.learner("a"), "print(1 + 1)")["stdout"] == "2\n"  # the kernel survived it


def test_the_idle_culler_runs_as_a_hub_service(room):
    teacher = HubClient(room.url, room.names["teacher"])
    assert teacher.login(room.instructor_password)
    teacher.new_token()
    services = teacher.hub_api("GET", "services").json()
    assert {"idle-culler", "room"} <= set(services)
    culler = [p.cmdline() for p in room.processes() if "jupyterhub_idle_culler" in " ".join(p.cmdline())]
    assert len(culler) == 1 and "--timeout=3600" in culler[0], culler


# --- the room view -------------------------------------------------------------------------------

def test_the_room_view_is_for_admins_only(room):
    a = room.learner("a")
    assert a.http.get(f"{room.url}/services/room/", timeout=60).status_code == 403
    assert a.http.get(f"{room.url}/services/room/api/room", timeout=60).status_code == 403
    assert requests_get(f"{room.url}/services/room/api/room", a.token).status_code in (302, 403)
    teacher = HubClient(room.url, room.names["teacher"])
    assert teacher.login(room.instructor_password)
    view = teacher.http.get(f"{room.url}/services/room/api/room", timeout=60)
    assert view.status_code == 200
    rows = {row["name"]: row for row in view.json()["learners"]}
    assert set(rows) == {room.names["a"], room.names["b"]}
    assert [e.rsplit(": ", 1)[1] for e in rows[room.names["b"]]["passed"]] == ["one_trip"]
    assert rows[room.names["a"]]["stuck"] and rows[room.names["a"]]["last"]["result"] == "incorrect"
    assert view.json()["most_stuck"]["learners"] == 1
    for row in rows.values():  # a notebook open now and one with records is one entry, by its title
        assert row["opened"] and not any(name.endswith(".ipynb") for name in row["opened"]), row["opened"]
    owner = pwd.getpwnam(room.names["b"]).pw_uid  # reading it changed nothing of b's
    progress = Path(pwd.getpwnam(room.names["b"]).pw_dir, ".gradient-accumulation-lab", "progress.json")
    assert progress.stat().st_uid == owner


def requests_get(url: str, token: str):
    import requests
    return requests.get(url, headers={"Authorization": f"token {token}"}, allow_redirects=False, timeout=60)


def test_the_room_view_refreshes_in_chromium(room):
    sync_api = pytest.importorskip("playwright.sync_api")
    if not Path("/usr/bin/chromium").exists():
        pytest.skip("Chromium is not installed (apt-get install chromium)")
    a = room.learner("a")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox", "--disable-gpu",
                                                                              "--disable-dev-shm-usage"])
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 700})
            page.goto(f"{room.url}/hub/login")
            page.fill("#username_input", room.names["teacher"])
            page.fill("#password_input", room.instructor_password)
            page.click("#login_submit")
            page.wait_for_load_state()
            page.goto(f"{room.url}/services/room/")
            row = page.locator(f'tr[data-learner="{a.name}"]')
            row.wait_for(timeout=60_000)
            page.evaluate("() => { window.__same_page = true; }")
            assert "divide_by" not in row.inner_text()
            assert in_kernel(a, CHECK + "ex.divide_by.check(1)")["error"] is None  # a tries another exercise
            page.wait_for_function(f"""() => (document.querySelector('tr[data-learner="{a.name}"]') || {{}})
                                      .textContent?.includes('divide_by')""", timeout=30_000)
            assert page.evaluate("() => window.__same_page") is True  # updated in place, not reloaded
            assert "stuck on" in page.locator("#stuck").inner_text()
            ARTIFACTS.mkdir(exist_ok=True)
            page.screenshot(path=str(ARTIFACTS / "room_view.png"), full_page=True)
        finally:
            browser.close()
