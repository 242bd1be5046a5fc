"""The instructor's record of a room: `make hub-export`, and the room view's two download buttons.

Two CSV files from every learner's progress file, each read *as the learner* (read_progress.py,
as the room view reads it):
  - progress: one row per learner and checked exercise: opened (the notebook showed its exercises),
    attempts, passed, first try;
  - gradebook: Canvas's gradebook import (Student, ID, SIS User ID, SIS Login ID, Section, then one
    column per notebook: exercises passed, its "Points Possible" the notebook's exercises). Canvas
    matches a row by one identity column; the room's user name is put under Student and SIS Login ID.
Learners write their own progress files, so the record shows participation, not proof: a learner
can write any file they like into their own home.
"""
from __future__ import annotations

import asyncio
import csv
import io
import json
import os
import pwd
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
NOTE = ("Learners write their own progress files: this record shows participation, not proof "
        "(a learner can write any file into their own home).")
READ_TIMEOUT_S = 20


async def read_as_learner(name: str) -> dict:
    """The learner's progress file ({"sets", "records", "problem"}), read by read_progress.py running as
    them (their uid and gid, no other group): a link they plant reaches only what they could read."""
    try:
        user = pwd.getpwnam(name)
    except KeyError:
        return {"sets": {}, "records": [], "problem": "no such system user"}
    process = await asyncio.create_subprocess_exec(  # -I: no code from their home, no $PYTHON* variables
        sys.executable, "-I", str(HERE / "read_progress.py"),
        user=user.pw_uid, group=user.pw_gid, extra_groups=[],  # the learner alone: never root's group 0
        cwd="/", env={"HOME": user.pw_dir, "LANG": "C.UTF-8"},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    try:
        out, err = await asyncio.wait_for(process.communicate(), READ_TIMEOUT_S)
    except asyncio.TimeoutError:
        process.kill()
        await process.wait()
        return {"sets": {}, "records": [], "problem": f"reading took over {READ_TIMEOUT_S} s"}
    if process.returncode:
        return {"sets": {}, "records": [], "problem": (err.decode(errors="replace").strip().splitlines()
                                                        or ["failed"])[-1]}
    return json.loads(out)


def exercise_rows(progress: dict[str, dict]) -> list[dict]:
    """Learner x exercise, every exercise any learner's file names (a notebook nobody opened has none)."""
    exercises = sorted({(notebook, name) for found in progress.values()
                        for notebook, entries in found["sets"].items() for name in entries}
                       | {(r["notebook"], r["exercise"]) for found in progress.values() for r in found["records"]})
    rows = []
    for learner, found in sorted(progress.items()):
        tries: dict[tuple[str, str], list[str]] = {}
        for r in found["records"]:  # oldest first
            tries.setdefault((r["notebook"], r["exercise"]), []).append(r["result"])
        for notebook, exercise in exercises:
            results = tries.get((notebook, exercise), [])
            rows.append({"learner": learner, "notebook": notebook, "exercise": exercise,
                         "opened": notebook in found["sets"] or bool(results), "attempts": len(results),
                         "passed": "correct" in results, "first_try": results[:1] == ["correct"],
                         "problem": found["problem"] or ""})
    return rows


def _csv(header: list[str], rows: list[list]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return out.getvalue()


def progress_csv(rows: list[dict]) -> str:
    """One line per learner and exercise, after a first line saying what the record is (a # comment)."""
    fields = ["learner", "notebook", "exercise", "opened", "attempts", "passed", "first_try", "problem"]
    table = [[("yes" if r[f] else "no") if isinstance(r[f], bool) else r[f] for f in fields] for r in rows]
    return f"# {NOTE}\n" + _csv(fields, table)


def gradebook_csv(rows: list[dict]) -> str:
    """Canvas's gradebook import: one column per notebook, its score the exercises passed there."""
    notebooks = sorted({r["notebook"] for r in rows})
    possible = {n: len({r["exercise"] for r in rows if r["notebook"] == n}) for n in notebooks}
    learners = sorted({r["learner"] for r in rows})
    passed = {(r["learner"], r["notebook"]): 0 for r in rows}
    for r in rows:
        passed[r["learner"], r["notebook"]] += r["passed"]
    header = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", *notebooks]
    table = [["Points Possible", "", "", "", "", *(possible[n] for n in notebooks)]]
    table += [[name, "", "", name, "", *(passed[name, n] for n in notebooks)] for name in learners]
    return _csv(header, table)


async def read_room(learners: list[str]) -> dict[str, dict]:
    return dict(zip(learners, await asyncio.gather(*(read_as_learner(name) for name in learners))))


def main() -> int:
    """Write both files into the hub's state folder (root only), and say where."""
    sys.path.insert(0, str(HERE.parent))  # the checkout: this file runs as a script
    from hub.room import load_room

    state = Path(os.environ.get("LAB_HUB_STATE", "/var/lib/gradient-accumulation-lab-hub"))
    try:
        learners = load_room(state)["learners"]
    except FileNotFoundError:
        print(f"No room here: {state / 'room.json'} does not exist (make hub makes one).", file=sys.stderr)
        return 1
    progress = asyncio.run(read_room(learners))
    rows = exercise_rows(progress)
    folder = state / "exports"
    folder.mkdir(mode=0o700, exist_ok=True)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    for kind, text in (("progress", progress_csv(rows)), ("gradebook", gradebook_csv(rows))):
        path = folder / f"room-{kind}-{stamp}.csv"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with open(fd, "w", encoding="utf-8") as file:
            file.write(text)
        print(path)
    unreadable = sorted(name for name, found in progress.items() if found["problem"])
    print(f"{len(learners)} learners, {len({(r['notebook'], r['exercise']) for r in rows})} exercises"
          + (f"; not read: {', '.join(unreadable)}" if unreadable else "") + f". {NOTE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
