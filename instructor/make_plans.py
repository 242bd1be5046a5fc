"""Write the instructor kit's plans and room checklist from the measured benchmark results.

    python instructor/make_plans.py             # make plans: writes plans.md, notebooks.md, room_setup.md here
    python instructor/make_plans.py --out DIR   # elsewhere (the tests)

A notebook's time is its measured run time plus reading, widget and exercise time at the rates below.
"""
from __future__ import annotations

import json
import math
import re
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
HERE = ROOT / "instructor"
RESULTS = ROOT / "benchmarks" / "results.json"
CLASSROOM = ROOT / "benchmarks" / "results" / "classroom.json"
HUB_ROOM = ROOT / "benchmarks" / "results" / "hub_room_40.json"
INSTALL = ROOT / "benchmarks" / "results" / "install.json"
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"

# The assumptions: words per minute, minutes per live widget, minutes per checked exercise.
AUDIENCES = {
    "newcomers": {"tiers": ("start", "beginner"), "wpm": 150, "widget_min": 5, "exercise_min": 6,
                  "who": "no maths needed; they meet .grad for the first time"},
    "engineers": {"tiers": ("start", "beginner", "developer"), "wpm": 200, "widget_min": 3, "exercise_min": 4,
                  "who": "they write training loops; the proofs and the classic bugs"},
    "researchers": {"tiers": ("start", "developer", "researcher"), "wpm": 230, "widget_min": 2, "exercise_min": 3,
                    "who": "why it is exact and where it breaks"},
}
LENGTHS = (60, 90, 180)
OPENING_MIN, CLOSING_MIN, BREAK_MIN = 5, 5, 10  # welcome + install check; questions; one break per 90 min

# Misconceptions the lab targets: what learners believe, what is true, a pattern that finds the
# first cell of a notebook that addresses it, and the notebooks (a pattern on the file name) it is
# looked for in. The first seven are about the loop: not looked for in researcher_6-9, whose cells
# call zero_grad or divide by K for other reasons.
LOOP_NOTEBOOKS = r"^(00|beginner|developer|researcher_[1-5])_"
MISCONCEPTIONS = [
    ("accumulating gradients only approximates a big batch", "with the loss divided by K it is exact, up to float rounding",
     r"allclose"),
    ("the loss does not need dividing by K", "without it the summed gradient is K times too big (`forgot-to-divide`)",
     r"loss_not_divided|/ ?accumulation_steps|/ ?K\b|/ ?trips\b"),
    ("zero_grad belongs after every backward", "it clears the pile: only the last micro-batch survives",
     r"zero_grad_every_micro_step|zero_grad\("),
    ("optimizer.step() runs after every micro-batch", "then it is K small updates, not one big-batch update",
     r"step_every_micro_step|is_update_step|micro_step == K - 1"),
    ("the last, shorter group can be divided by K like the others", "it must be weighted by its own size, or the update is too small",
     r"tail_micro_batches|tail_divided_by_k|uneven"),
    ("clipping and schedulers can run every micro-step", "they belong to the update: once per K micro-steps",
     r"clip_every_micro_step|scheduler_every_micro_step|clip_grad_norm_"),
    ("a bigger K saves memory and costs nothing", "memory follows b; time grows with K passes per update",
     r"memory|forward/backward passes"),
]
MISCONCEPTIONS = [(belief, truth, pattern, LOOP_NOTEBOOKS) for belief, truth, pattern in MISCONCEPTIONS] + [
    ("accumulation shortens the time to a target loss", "on one device time grows with the examples; at a fixed b a "
     "larger K never shortens it (the steps/examples trade-off is about parallel hardware)", r"passes", r"^researcher_3_"),
    ("accumulation touches only the activations", "it keeps the whole gradient alive across the window (no optimizer "
     "in backward), often in fp32, unsharded under no_sync", r"register_post_accumulate_grad_hook", r"^researcher_4_"),
    ("DDP's mean over ranks weighs every token the same", "it weighs ranks: a rank with few tokens weighs more; "
     "all-reduce the token count first", r"run_across_ranks\(", r"^researcher_6_"),
    ("no_sync saves memory under FSDP as it does under DDP", "with the sync off each rank holds the whole unsharded "
     "gradient until the last micro-step", r"run_fsdp\(", r"^researcher_7_"),
    ("pipeline micro-batches are something other than accumulation", "GPipe and 1F1B sum the micro-batches' "
     "gradients; the bubble (p-1)/(m+p-1) is why m is large", r"simulate\(", r"^researcher_7_"),
    ("a token mean inside each micro-batch is the batch's token mean", "only a count over the whole window (DAPO's) "
     "survives re-partitioning into micro-batches and devices", r"bnpo", r"^researcher_8_"),
    ("the MoE balance loss can be computed per micro-batch and averaged", "it is a product of batch statistics: "
     "accumulate the counts over the window, then compute it once", r"window_aux_step", r"^researcher_8_"),
    ("scaling the learning rate is all Adam needs when K grows", "Malladi's rule rescales beta1, beta2 and eps too; "
     "beta2's half-life and AdamW's tau change with K", r"malladi", r"^researcher_9_"),
    ("K can change mid-run with nothing else changed", "a scheduler that counts micro-steps drifts: count updates",
     r"scheduler_positions|micro_steps", r"^researcher_9_"),
]


def measured_seconds() -> dict[str, float]:
    try:
        return {path: entry["seconds"] for path, entry in json.loads(RESULTS.read_text())["notebooks"].items()}
    except (OSError, ValueError, KeyError):
        return {}


def notebook_facts(path: str, seconds: dict[str, float]) -> dict:
    nb = nbformat.read(ROOT / path, as_version=4)
    words = sum(len(re.findall(r"\w+", c.source)) for c in nb.cells if c.cell_type == "markdown")
    code = [c for c in nb.cells if c.cell_type == "code"]
    widgets = sum(WIDGET_MIME in o.get("data", {}) for c in code for o in c.get("outputs", []))
    checks = sum(len(re.findall(r"\.check\(", c.source)) for c in code)
    sets = sorted({m for c in code for m in re.findall(r"\b(\w+_exercises)\(\)", c.source)})
    cells = [(i, c) for i, c in enumerate(nb.cells, 1) if c.cell_type == "code"]  # where it is shown, not said
    found = []
    for belief, truth, pattern, where in MISCONCEPTIONS:
        if not re.search(where, Path(path).name):
            continue
        hit = next(((i, c) for i, c in cells if re.search(pattern, c.source)), None)
        if hit:
            i, c = hit
            first = next((ln.strip() for ln in c.source.splitlines() if ln.strip()), "")[:70]
            found.append((belief, truth, i, first))
    return {"words": words, "widgets": widgets, "checks": checks, "sets": sets, "run_s": seconds.get(path),
            "misconceptions": found}


def minutes(facts: dict, audience: dict) -> float:
    run = (facts["run_s"] or 0) / 60
    return run + facts["words"] / audience["wpm"] + facts["widgets"] * audience["widget_min"] \
        + facts["checks"] * audience["exercise_min"]


def plan(entries: list, facts: dict, audience: dict, length: int) -> tuple[list, list, float]:
    """Notebooks in catalog order while they fit; the rest is homework."""
    breaks = BREAK_MIN * (length // 90 - (1 if length % 90 == 0 else 0)) if length > 90 else 0
    budget = length - OPENING_MIN - CLOSING_MIN - breaks
    used, taught, homework = 0.0, [], []
    for entry in entries:
        need = math.ceil(minutes(facts[entry.path], audience))  # whole minutes, as the plan shows them
        if used + need <= budget:  # a notebook that does not fit is skipped; a later, shorter one may
            taught.append((entry, need))
            used += need
        else:
            homework.append((entry, need))
    return taught, homework, breaks


def write_plans(entries_by_audience: dict, facts: dict) -> str:
    lines = ["# Workshop plans", "",
             "Written by `instructor/make_plans.py` from the measured run times in `benchmarks/results.json`;",
             "do not edit by hand. Minutes per notebook = measured Run All time + reading (markdown words at the",
             "audience's words per minute) + live widgets + checked exercises, at the rates in the script:", ""]
    lines += [f"- **{name}** ({a['who']}): {a['wpm']} words/min, {a['widget_min']} min per widget, "
              f"{a['exercise_min']} min per checked exercise" for name, a in AUDIENCES.items()]
    lines += ["", f"Every plan opens with {OPENING_MIN} min (welcome; everyone runs `widgets.doctor()`) and closes with "
              f"{CLOSING_MIN} min of questions; 180 minutes include a {BREAK_MIN}-minute break.", ""]
    for name, audience in AUDIENCES.items():
        entries = entries_by_audience[name]
        for length in LENGTHS:
            taught, homework, breaks = plan(entries, facts, audience, length)
            lines += [f"## {name.capitalize()}, {length} minutes", "", "| minutes | notebook | of which: run / read / widgets / exercises |",
                      "|---:|---|---|", f"| {OPENING_MIN} | opening: `widgets.doctor()` on every machine | |"]
            for entry, need in taught:
                f = facts[entry.path]
                run = f"{f['run_s']:.0f} s" if f["run_s"] is not None else "run time not measured yet"
                lines.append(f"| {math.ceil(need)} | {entry.title} (`{Path(entry.path).name}`) | {run} / {f['words']} words / "
                             f"{f['widgets']} widgets / {f['checks']} checks |")
            if breaks:
                lines.append(f"| {breaks} | break | |")
            lines.append(f"| {CLOSING_MIN} | questions | |")
            spare = length - OPENING_MIN - CLOSING_MIN - breaks - sum(math.ceil(n) for _, n in taught)
            lines += ["", f"Slack: {spare} min."]
            if homework:
                lines.append("Homework (does not fit): " + ", ".join(f"{e.title} (~{math.ceil(n)} min)" for e, n in homework) + ".")
            lines.append("")
    return "\n".join(lines)


def exercise_set_maker(name: str):
    """The function that builds the exercise set `name`, from the lesson surface that offers it."""
    import importlib
    import pkgutil

    import widgets.lessons

    for lesson in pkgutil.iter_modules(widgets.lessons.__path__):
        maker = getattr(importlib.import_module(f"widgets.lessons.{lesson.name}"), name, None)
        if maker is not None:
            return maker
    raise AttributeError(f"no lesson's surface offers {name!r}")


def answers(sets: list[str]) -> list[str]:
    lines = []
    for name in sets:
        try:
            exercise_set = exercise_set_maker(name)()
        except Exception as error:  # a set still being written elsewhere: say so, do not stop the kit
            lines.append(f"- `{name}()`: could not be built here ({type(error).__name__}: {error})")
            continue
        for exercise in exercise_set:
            try:
                solution = exercise.solution(anyway=True)  # the instructor's copy: no attempt needed
            except TypeError:
                solution = exercise.solution()
            lines += [f"- **{exercise.title}** (`ex.{exercise.name}`): {solution.explanation}", "",
                      "  ```python", *("  " + ln for ln in solution.code.splitlines()), "  ```", ""]
    return lines


def write_notebooks(entries: list, facts: dict) -> str:
    lines = ["# Notebook notes", "", "Written by `instructor/make_plans.py`. Cell numbers count every cell from 1, as",
             "JupyterLab's cell order; each misconception points at the first cell that addresses it.", ""]
    for entry in entries:
        f = facts[entry.path]
        lines += [f"## {entry.title} (`{entry.path}`)", "", f"**Objective.** {entry.description[:1].upper()}{entry.description[1:]}.", ""]
        if f["misconceptions"]:
            lines += ["**Misconceptions it targets.**", "", "| learners believe | the notebook shows | cell |", "|---|---|---|"]
            lines += [f"| {b} | {t} | {i}: `{first}` |" for b, t, i, first in f["misconceptions"]]
            lines += ["", "**Discussion prompts.**", ""]
            lines += [f"- Before cell {i}: \"Is it true that {b}?\" Ask for a show of hands, run the cell, read the number."
                      for b, _, i, _ in f["misconceptions"][:3]]
            lines.append("")
        if f["sets"]:
            lines += ["**Exercises' answers** (each is the tested `solution()`; learners see it only on request).", ""]
            lines += answers(f["sets"])
    return "\n".join(lines)


def offline_measured() -> str:
    path = ROOT / "benchmarks" / "results" / "offline_install.json"
    if not path.exists():
        return ""
    run = json.loads(path.read_text())
    return (f" Measured (`make offline-install`): the folder holds {run['wheelhouse']['files']} files, "
            f"{run['wheelhouse']['mb']} MB ({run['wheelhouse']['seconds']:.0f} s to fill); the install from it took "
            f"{run['offline_install']['seconds']:.0f} s ({run['offline_install']['venv_mb']} MB in .venv).")


def hub_measured() -> str:
    """The simulated room of `make hub-room N=40` (benchmarks/results/hub_room_40.json), in a sentence."""
    if not HUB_ROOM.exists():
        return ""
    run = json.loads(HUB_ROOM.read_text())
    return (f" On one server, `make hub LEARNERS=...` serves the room and `make hub-stop` ends it (instructor/hub.md). "
            f"Measured with {run['learners']} simulated learners ({run['measured_on']}, {run['machine']}), each running "
            f"beginner_1 and beginner_2, then changing a setting every 2-4 s: a change answered in "
            f"{run['latency_ms']['median']} ms (median), {run['latency_ms']['p95']} ms (p95); each learner held "
            f"{run['pss_mb']['median']} MB (PSS, median); {len(run['failures'])} failures.")


def write_room(classroom: dict, install: dict) -> str:
    lines = ["# Room setup", "", "Written by `instructor/make_plans.py` from `benchmarks/results/classroom.json` and",
             "`install.json` (`make classroom`, `make install-size`); do not edit by hand.", ""]
    server = classroom.get("lab_server_idle_mb")
    alone = classroom.get("alone", {})
    heaviest = max((r["peak_kernel_mb"] for r in alone.values()), default=None)
    if server and heaviest:
        per_learner = heaviest + server
        lines += ["## Memory per learner", "",
                  f"Measured: an idle JupyterLab server holds {server} MB; the kernels peak at "
                  + ", ".join(f"{r['peak_kernel_mb']} MB (`{Path(p).name}`, {r['notebook_s']['max']} s)" for p, r in alone.items())
                  + f". One learner running the explorer notebook needs about {per_learner} MB with their server: "
                  f"{math.floor(1024 / per_learner)} learner(s) per GB on a JupyterHub.", ""]
        for path, run in alone.items():
            verdict = "fits" if run["fits_binder"] else "does NOT fit"
            lines.append(f"- Binder ({classroom['binder_limit_mb']} MB): `{Path(path).name}` with its server, "
                         f"{run['with_server_mb']} MB: {verdict}.")
        lines.append("")
    if classroom.get("rooms"):
        lines += ["## Many kernels at once on one machine", "",
                  f"Each learner's kernel runs the explorer notebook from start to end, all starting together, on "
                  f"{classroom.get('machine', 'the CI machine')} ({classroom.get('load_note', '')}).", "",
                  "| kernels | wall time | each notebook | peak of the kernels' total memory |", "|---:|---:|---|---:|"]
        for r in classroom["rooms"]:
            lines.append(f"| {r['kernels']} | {r['wall_s']} s | {r['notebook_s']['min']}-{r['notebook_s']['max']} s | "
                         f"{r['peak_total_kernels_mb']} MB |")
        lines += ["", "A 2-core hub serves a room that runs cells in turn; a room that presses Run All together "
                  "waits as the table says. Give each kernel one thread on a shared hub (OMP_NUM_THREADS=1).", ""]
    lines += ["## Checklist", "", "**Binder** (nothing to install): open the badge link once the day before (the first "
              "build takes minutes); share the link; each learner runs `widgets.doctor()` first.", "",
              "**Local installs**: ask learners to run `make lab` before the day"]
    if install.get("learner"):
        lines[-1] += (f" (measured: {install['learner']['venv_mb']} MB in .venv with the CPU build of torch, "
                      f"{install['learner']['seconds']:.0f} s on {install.get('machine', 'the CI machine')}")
        lines[-1] += "; Linux machines without a GPU: `make lab TORCH=cpu`, since PyPI's Linux torch is a CUDA build of several GB)."
    else:
        lines[-1] += "."
    lines += ["", "**JupyterHub**: the memory per learner above; the lab's requirements.txt in the image; "
              "`python tools/lab.py --configure` once in the image (no news pop-up)." + hub_measured(), "",
              "**Offline room**: on a machine with network, `make wheelhouse` (every wheel of the learner set into "
              "`wheelhouse/`); copy the checkout with `wheelhouse/` to each machine (USB stick); there, "
              "`make lab WHEELS=wheelhouse` installs with no network. Voila's page links icons from a CDN: offline "
              "they are missing, nothing else." + offline_measured(), "",
              "**Projector**: `make present` (or `make present PRESET=forgot-to-divide`: passed without a shell, a bad "
              "one stops before anything starts) prints the page's URL with its token: open that URL; without the token "
              "the page is refused, and kernels no page is connected to are shut down after 30 s. The explorer shows "
              "its own call, one line a learner can copy into a cell.", ""]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    out = Path(argv[argv.index("--out") + 1]) if "--out" in argv else HERE
    from widgets.lessons.start_here.catalog import NOTEBOOKS

    seconds = measured_seconds()
    present = [e for e in NOTEBOOKS if (ROOT / e.path).exists()]
    facts = {e.path: notebook_facts(e.path, seconds) for e in present}
    by_audience = {name: [e for e in present if e.tier in a["tiers"]] for name, a in AUDIENCES.items()}
    load = lambda p: json.loads(p.read_text()) if p.exists() else {}  # noqa: E731
    (out / "plans.md").write_text(write_plans(by_audience, facts))
    (out / "notebooks.md").write_text(write_notebooks(present, facts))
    (out / "room_setup.md").write_text(write_room(load(CLASSROOM), load(INSTALL)))
    print("written: instructor/plans.md, instructor/notebooks.md, instructor/room_setup.md")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
