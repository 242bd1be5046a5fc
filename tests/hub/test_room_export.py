"""The instructor's record (hub/export.py): from the room view's links and from `make hub-export`, every
learner's rows, each read as that learner, and a planted progress file refused as the room view refuses it.

The room (tests/hub/support.py) has real progress: b passed `one_trip` on the first try, a tried `trips`
once and missed it.
"""
from __future__ import annotations

import csv
import io
import os
import stat
import subprocess
import sys

from hub.client import HubClient
from hub.export import NOTE, exercise_rows, gradebook_csv, progress_csv
from tests.hub.support import ROOT, planted_link


def _teacher(room) -> HubClient:
    teacher = HubClient(room.url, room.names["teacher"])
    assert teacher.login(room.instructor_password)
    return teacher


def _download(client: HubClient, room, kind: str):
    return client.http.get(f"{room.url}/services/room/export/{kind}.csv", timeout=60)


def _progress_rows(text: str) -> list[dict]:
    first, _, body = text.partition("\n")
    assert first == f"# {NOTE}"  # says what the record is, before any row
    return list(csv.DictReader(io.StringIO(body)))


def test_the_record_holds_every_learner_and_exercise_as_they_did_it(room):
    a, b = room.names["a"], room.names["b"]
    teacher = _teacher(room)
    rows = _progress_rows(_download(teacher, room, "progress").text)
    exercises = {(r["notebook"], r["exercise"]) for r in rows}
    assert {e for _, e in exercises} >= {"one_trip", "trips"}
    assert {(r["learner"], r["notebook"], r["exercise"]) for r in rows} == {
        (name, n, e) for name in (a, b) for n, e in exercises}  # learners x exercises, each once
    row = {(r["learner"], r["exercise"]): r for r in rows}
    assert (row[b, "one_trip"]["attempts"], row[b, "one_trip"]["passed"], row[b, "one_trip"]["first_try"]) == (
        "1", "yes", "yes")
    assert (row[a, "trips"]["attempts"], row[a, "trips"]["passed"], row[a, "trips"]["first_try"]) == ("1", "no", "no")
    assert (row[a, "one_trip"]["attempts"], row[a, "one_trip"]["passed"]) == ("0", "no")
    assert row[a, "trips"]["opened"] == "yes" and not any(r["problem"] for r in rows)

    book = list(csv.reader(io.StringIO(_download(teacher, room, "gradebook").text)))
    assert book[0][:5] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"] and book[1][0] == "Points Possible"
    scores = {line[0]: dict(zip(book[0][5:], line[5:])) for line in book[2:]}
    assert set(scores) == {a, b} and all(line[3] == line[0] for line in book[2:])  # the room's name as SIS Login ID
    notebook = row[b, "one_trip"]["notebook"]
    assert (scores[b][notebook], scores[a][notebook]) == ("1", "0")


def test_only_the_instructor_downloads_it(room):
    a = room.learner("a")
    for kind in ("progress", "gradebook"):
        assert _download(a, room, kind).status_code == 403


def test_make_hub_export_writes_the_same_record_for_root_alone(room):
    done = subprocess.run([sys.executable, str(ROOT / "hub" / "export.py")], env={**os.environ,
                          "LAB_HUB_STATE": str(room.state)}, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    paths = [line for line in done.stdout.splitlines() if line.endswith(".csv")]
    assert len(paths) == 2 and NOTE in done.stdout and "not read" not in done.stdout
    for path in paths:
        info = os.stat(path)
        assert stat.S_IMODE(info.st_mode) == 0o600 and info.st_uid == 0
        assert stat.S_IMODE(os.stat(os.path.dirname(path)).st_mode) == 0o700
    progress = next(p for p in paths if "progress" in p)
    with open(progress, encoding="utf-8") as file:
        assert _progress_rows(file.read()) == _progress_rows(_download(_teacher(room), room, "progress").text)


def test_a_planted_progress_file_is_refused_as_the_room_view_refuses_it(room):
    a = room.names["a"]
    with planted_link(a):
        text = _download(_teacher(room), room, "progress").text
        done = subprocess.run([sys.executable, str(ROOT / "hub" / "export.py")], env={**os.environ,
                              "LAB_HUB_STATE": str(room.state)}, capture_output=True, text=True, timeout=120)
    assert "Root only" not in text and "secret" not in text
    mine = [r for r in _progress_rows(text) if r["learner"] == a]
    assert mine and all("Permission denied" in r["problem"] for r in mine)
    assert not any(r["passed"] == "yes" for r in mine)
    assert done.returncode == 0 and f"not read: {a}" in done.stdout


def test_the_tables_count_what_each_learner_did():
    """The same rules on a made-up room, no hub needed: attempts, a pass after a miss, a notebook opened but
    never tried, a learner whose file could not be read."""
    progress = {
        "ada": {"sets": {"N1": {"x": {}, "y": {}}}, "problem": None, "records": [
            {"notebook": "N1", "exercise": "x", "result": "incorrect", "time": "t1"},
            {"notebook": "N1", "exercise": "x", "result": "correct", "time": "t2"}]},
        "ben": {"sets": {}, "records": [], "problem": "Permission denied"},
    }
    rows = {(r["learner"], r["exercise"]): r for r in exercise_rows(progress)}
    assert (rows["ada", "x"]["attempts"], rows["ada", "x"]["passed"], rows["ada", "x"]["first_try"]) == (2, True, False)
    assert (rows["ada", "y"]["opened"], rows["ada", "y"]["attempts"]) == (True, 0)
    assert rows["ben", "x"]["problem"] == "Permission denied" and not rows["ben", "x"]["opened"]
    book = list(csv.reader(io.StringIO(gradebook_csv(list(rows.values())))))
    assert book[1] == ["Points Possible", "", "", "", "", "2"] and book[2][-1] == "1" and book[3][-1] == "0"
    assert progress_csv([]).startswith("# ")  # an empty room still says what the record is
