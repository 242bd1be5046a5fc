"""Speed and memory of the lab, measured (never asserted in timed tests).

    python benchmarks/benchmark.py                 # explorer latency + every notebook
    python benchmarks/benchmark.py --explorer-only  # (or --skip-notebooks)
    python benchmarks/benchmark.py --room 20       # 20 learners' sessions at once

Prints, and writes to benchmarks/results.json:
- slider change -> figure updated, in the kernel: the time from setting a control's value (what
  a slider move does) until the new PNG sits in the explorer's Image widget, over a scripted
  sequence of changes that mixes first visits (settings never shown before: trained when asked
  for) and revisits, next to bare redraws of the same figure in the same run.
  `--room N` runs N learners at once instead, each the same session in a process of its own with
  its pauses slept for real (a hub room, Binder's shared nodes); the change times of all N are pooled;
- each notebook's run time from kernel start, and the peak memory of its kernel plus any worker
  processes it starts (see memory.py): the tree's resident pages, each counted once (the budget's
  reading), and the per-process RSS and PSS summed.
Budgets: median <= 100 ms, p95 <= 250 ms; beginner and developer notebooks <= 25 s and <= 600 MB
(issue 8), developer_4 <= 30 s (issue 11), researcher 1-2 <= 30 s and <= 600 MB (issue 9),
researcher 3-5 <= 45 s and <= 800 MB with the DDP workers (issue 10); researcher 6-9 <= 45 s and
<= 600 MB (issues 18, 19), <= 800 MB for those that start two workers (researcher_6, researcher_7). `python benchmarks/memory.py
NOTEBOOK --limit-mb 800` also runs one under a hard 800 MB limit, as Binder would.
"""
from __future__ import annotations

import argparse
import json
import platform
import select
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import psutil  # noqa: E402

from memory import measure_notebook  # noqa: E402  (this folder is on sys.path: run as a script)

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results.json"


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (0..100) by linear interpolation between order statistics."""
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def summary(seconds: list[float]) -> dict:
    ms = [s * 1000 for s in seconds]
    if not ms:
        return {"n": 0, "median_ms": None, "p95_ms": None}
    return {"n": len(ms), "median_ms": round(statistics.median(ms), 1), "p95_ms": round(percentile(ms, 95), 1)}


SWEEP_PAUSE_S = 0.15  # between two arrow-key presses on one slider (the Chromium round trip alone is ~0.07 s)
READ_PAUSE_S = 1.0  # after a jump, a mistake or the optimizer switched: the learner reads the figure and readout


def slider_script() -> list[tuple[str, object]]:
    """A learner's session: arrow-key steps up and back down on both sliders, a mistake chosen
    and dropped, jumps, and the optimizer switched to AdamW and back. Every first visit of a
    setting is cold (three regimes trained)."""
    steps: list[tuple[str, object]] = []
    steps += [("accumulation_steps", k) for k in range(5, 13)]  # 8 cold steps up
    steps += [("accumulation_steps", k) for k in range(11, 3, -1)]  # 8 revisits down
    steps += [("micro_batch_size", b) for b in range(9, 17)]  # 8 cold steps up
    steps += [("micro_batch_size", b) for b in range(15, 7, -1)]  # 8 revisits down
    steps += [("mistake", "loss_not_divided"), ("mistake", "")]
    steps += [("accumulation_steps", 16), ("micro_batch_size", 64), ("accumulation_steps", 1), ("micro_batch_size", 1)]
    steps += [("accumulation_steps", 4), ("micro_batch_size", 8)]
    # the optimizer dropdown: AdamW cold, a few steps under it, then back to SGD (cached)
    steps += [("optimizer", "adamw"), ("accumulation_steps", 5), ("mistake", "loss_not_divided"),
              ("mistake", ""), ("accumulation_steps", 4), ("optimizer", "sgd")]
    return steps


def learner_pause(change: tuple[str, object], last: tuple[str, object] | None, read: float = READ_PAUSE_S) -> float:
    """The pause before `change`: short while one slider is swept a notch at a time, else time to read."""
    sweep = last is not None and change[0] == last[0] and change[0] in ("accumulation_steps", "micro_batch_size") \
        and abs(change[1] - last[1]) == 1
    return SWEEP_PAUSE_S if sweep else read


def session(read_pause: float = READ_PAUSE_S, *, real_time: bool = False, before_start=None) -> tuple[object, dict]:
    """One learner's scripted session (`slider_script`) on a new explorer: the explorer, and the
    seconds of each change, split into first visits and revisits. With `real_time` the learner's
    pauses are slept (a room); `before_start()` runs once the explorer is built (a room waits there)."""
    from widgets.lessons.beginner_2.controls import make_accumulation_explorer

    start = time.perf_counter()
    explorer = make_accumulation_explorer(accumulation_steps=4, micro_batch_size=8)
    times = {"build_s": time.perf_counter() - start, "changes": [], "cold": [], "warm": []}
    if before_start is not None:
        before_start()
    seen, last = {explorer.record.config}, None
    for name, value in slider_script():
        if real_time:
            time.sleep(learner_pause((name, value), last, read_pause))
        last = (name, value)
        before = explorer.image.value
        start = time.perf_counter()
        explorer.controls[name].value = value
        elapsed = time.perf_counter() - start
        if explorer.image.value is before:
            raise RuntimeError(f"setting {name}={value} did not update the figure")
        if explorer.errors.outputs:
            raise RuntimeError(f"setting {name}={value} raised: {explorer.errors.outputs}")
        config = explorer.record.config
        times["warm" if config in seen else "cold"].append(elapsed)
        seen.add(config)
        times["changes"].append(elapsed)
    return explorer, times


def measure_explorer() -> dict:
    """One learner's session, beside bare redraws of the same figure."""
    load_at_start = [round(x, 2) for x in psutil.getloadavg()]
    explorer, times = session()
    redrawn = sum(canvas.full_redraws - 1 for canvas in explorer.canvases)  # panels redrawn in full, the build's aside
    blit, full = [], []
    for _ in range(len(times["changes"])):
        start = time.perf_counter()
        explorer.render()
        blit.append(time.perf_counter() - start)
        start = time.perf_counter()
        explorer.render(full=True)
        full.append(time.perf_counter() - start)
    return {
        "build_s": round(times["build_s"], 2),
        "slider_change": summary(times["changes"]),
        "slider_change_cold": summary(times["cold"]),
        "slider_change_cached": summary(times["warm"]),
        "bare_redraw_blit": summary(blit),
        "bare_redraw_full": summary(full),
        "panels_redrawn_in_full": redrawn,
        "load_average_1_5_15": {"start": load_at_start, "end": [round(x, 2) for x in psutil.getloadavg()]},
    }


def learner(read_pause: float) -> None:
    """One learner of a room (`--learner`, started by `measure_room`): builds its explorer, prints
    "ready", waits for "go" on stdin, runs the session with its pauses slept, prints its times as JSON."""
    def wait_for_go() -> None:
        print("ready", flush=True)
        if sys.stdin.readline().strip() != "go":
            raise SystemExit("the room was called off before it started")

    _, times = session(read_pause, real_time=True, before_start=wait_for_go)
    print(json.dumps({key: times[key] for key in ("changes", "cold", "warm")}), flush=True)


def measure_room(learners: int, read_pause: float, timeout_s: float = 900.0) -> dict:
    """`learners` sessions at once on this machine, one process each, started together once every
    explorer is built; the change times of all of them pooled. Every process started here ends here."""
    command = [sys.executable, str(Path(__file__).resolve()), "--learner", "--read-pause", str(read_pause)]
    deadline = time.monotonic() + timeout_s
    processes, logs = [], []
    try:
        for _ in range(learners):
            logs.append(tempfile.TemporaryFile("w+"))
            processes.append(subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                              stderr=logs[-1], text=True))
        for process, log in zip(processes, logs):  # a learner that dies says so by an empty line
            if _line_from(process, deadline) != "ready":
                raise RuntimeError("a learner did not start: " + _tail(log))
        load_at_start = [round(x, 2) for x in psutil.getloadavg()]
        for process in processes:
            process.stdin.write("go\n")
            process.stdin.flush()
        pooled = {"changes": [], "cold": [], "warm": []}
        for process, log in zip(processes, logs):
            out, _ = process.communicate(timeout=max(1.0, deadline - time.monotonic()))
            if process.returncode != 0:
                raise RuntimeError(f"a learner failed (exit {process.returncode}): " + _tail(log))
            times = json.loads(out.strip().splitlines()[-1])
            for key in ("changes", "cold", "warm"):
                pooled[key] += times[key]
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
            process.wait()
        for log in logs:
            log.close()
    return {
        "learners": learners,
        "slider_change": summary(pooled["changes"]),
        "slider_change_cold": summary(pooled["cold"]),
        "slider_change_cached": summary(pooled["warm"]),
        "learner_pause_s": {"sweep": SWEEP_PAUSE_S, "read": read_pause},
        "load_average_1_5_15": {"start": load_at_start, "end": [round(x, 2) for x in psutil.getloadavg()]},
    }


def _line_from(process: subprocess.Popen, deadline: float) -> str:
    """The next line `process` prints, stripped; TimeoutError once `deadline` (time.monotonic) passes."""
    readable, _, _ = select.select([process.stdout], [], [], max(0.0, deadline - time.monotonic()))
    if not readable:
        raise TimeoutError("a learner took too long to build its explorer")
    return process.stdout.readline().strip()


def _tail(log) -> str:
    log.seek(0)
    return log.read()[-2000:]


def print_explorer(title: str, explorer: dict) -> None:
    print(f"{title}\n  {'(ms)':<40}  median     p95    n")
    for key in ("slider_change", "slider_change_cold", "slider_change_cached", "bare_redraw_blit", "bare_redraw_full"):
        if key not in explorer:
            continue
        s = explorer[key]
        if s["n"]:
            print(f"  {key:<40} {s['median_ms']:7.1f} {s['p95_ms']:7.1f} {s['n']:4d}")
        else:
            print(f"  {key:<40} {'-':>7} {'-':>7} {0:4d}")
    print(f"  load {explorer['load_average_1_5_15']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--skip-notebooks", "--explorer-only", action="store_true", help="measure only the explorer")
    parser.add_argument("--read-pause", type=float, default=READ_PAUSE_S,
                        help=f"a room's learner's pause after a jump or a switch, in seconds (default {READ_PAUSE_S})")
    parser.add_argument("--room", type=int, metavar="N",
                        help="N learners' sessions at once, one process each, pauses slept (nothing else is measured)")
    parser.add_argument("--learner", action="store_true", help=argparse.SUPPRESS)  # one of --room's processes
    args = parser.parse_args()
    if args.learner:
        return learner(args.read_pause)
    if args.room is not None and not 1 <= args.room <= 64:
        parser.error(f"--room must be a whole number from 1 to 64, got {args.room}")

    results = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    results["machine"] = {
        "cpus": psutil.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(terse=True),
    }
    command = " ".join(["python", "benchmarks/benchmark.py", *sys.argv[1:]])
    if args.room is not None:
        measured = measure_room(args.room, args.read_pause)
        measured |= {"command": command, "measured_on": time.strftime("%Y-%m-%d")}
        results.setdefault("explorer_room", {})[f"{args.room}_learners"] = measured
        print_explorer(f"{args.room} learners at once", measured)
        RESULTS.write_text(json.dumps(results, indent=2, sort_keys=True) + "\n")
        print(f"written to {RESULTS.relative_to(ROOT)}")
        return None
    # the map in start-here quotes "command" and "measured_on" for the notebook times: an explorer-only
    # run leaves them alone and records its own
    key = "explorer_command" if args.skip_notebooks else "command"
    results[key] = command
    results["explorer_measured_on" if args.skip_notebooks else "measured_on"] = time.strftime("%Y-%m-%d")
    results.pop("explorer_without_training_ahead", None)
    explorer = results["explorer"] = measure_explorer()
    print_explorer("explorer in the kernel", explorer)

    if not args.skip_notebooks:
        notebooks = {}
        for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
            rel = str(path.relative_to(ROOT))
            notebooks[rel] = measure_notebook(path)
            n = notebooks[rel]
            print(f"  {n['seconds']:6.1f} s  resident {n['peak_resident_mb']} MB  RSS summed {n['peak_rss_mb']:7.1f} MB  "
                  f"PSS summed {n['peak_pss_mb']:7.1f} MB  {rel}", flush=True)
        results["notebooks"] = notebooks
        for key in ("peak_rss_mb", "peak_resident_mb"):
            values = [n[key] for n in notebooks.values() if n[key] is not None]
            results[key] = max(values) if values else None
    RESULTS.write_text(json.dumps(results, indent=2, sort_keys=True) + "\n")
    print(f"written to {RESULTS.relative_to(ROOT)}")


if __name__ == "__main__":
    sys.exit(main())
