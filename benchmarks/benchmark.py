"""Speed and memory of the lab, measured (never asserted in timed tests).

    python benchmarks/benchmark.py                 # explorer latency + every notebook
    python benchmarks/benchmark.py --explorer-only  # (or --skip-notebooks)

Prints, and writes to benchmarks/results.json:
- slider change -> figure updated, in the kernel: the time from setting a control's value (what
  a slider move does) until the new PNG sits in the explorer's Image widget, over a scripted
  sequence of changes that mixes first visits (settings never shown before) and revisits, next to
  bare redraws of the same figure in the same run, and their ratios. Between two changes the
  learner pauses (SWEEP_PAUSE_S between arrow-key presses on one slider, READ_PAUSE_S after a jump
  or a switch), and the explorer works ahead in that time as it does in a kernel's idle time:
  the next notch right away, the other moves once the learner has paused QUIET_S (`train_ahead`).
  Work ahead still running when the next change comes delays it, and counts in its time. A first
  visit not trained ahead (a jump, a pause too short) is trained on the slider's path; the first
  visits are also given split by which of the two they were;
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
import statistics
import sys
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
READ_PAUSE_S = 1.0  # after a jump, a bug or the optimizer switched: the learner reads the figure and readout


def slider_script() -> list[tuple[str, object]]:
    """A learner's session: arrow-key steps up and back down on both sliders, a bug switched
    on and off, jumps, and the optimizer switched to AdamW and back. Every first visit of a
    setting is cold (three regimes trained)."""
    steps: list[tuple[str, object]] = []
    steps += [("accumulation_steps", k) for k in range(5, 13)]  # 8 cold steps up
    steps += [("accumulation_steps", k) for k in range(11, 3, -1)]  # 8 revisits down
    steps += [("micro_batch_size", b) for b in range(9, 17)]  # 8 cold steps up
    steps += [("micro_batch_size", b) for b in range(15, 7, -1)]  # 8 revisits down
    steps += [("loss_not_divided", True), ("loss_not_divided", False)]
    steps += [("accumulation_steps", 16), ("micro_batch_size", 64), ("accumulation_steps", 1), ("micro_batch_size", 1)]
    steps += [("accumulation_steps", 4), ("micro_batch_size", 8)]
    # the optimizer dropdown: AdamW cold, a few steps under it, then back to SGD (cached)
    steps += [("optimizer", "adamw"), ("accumulation_steps", 5), ("loss_not_divided", True),
              ("loss_not_divided", False), ("accumulation_steps", 4), ("optimizer", "sgd")]
    return steps


def learner_pause(change: tuple[str, object], last: tuple[str, object] | None, read: float = READ_PAUSE_S) -> float:
    """The pause before `change`: short while one slider is swept a notch at a time, else time to read."""
    sweep = last is not None and change[0] == last[0] and change[0] in ("accumulation_steps", "micro_batch_size") \
        and abs(change[1] - last[1]) == 1
    return SWEEP_PAUSE_S if sweep else read


def work_ahead_while_paused(explorer, pause: float) -> tuple[int, float]:
    """What the kernel's idle time does in `pause` after a change (see widgets.lessons.beginner_2.controls):
    the next notch at once, the other moves from QUIET_S on. Returns the steps taken and how long
    the work still runs past the pause (the next change waits that long)."""
    from widgets.lessons.beginner_2.controls_ahead import QUIET_S

    start = time.perf_counter()
    steps = explorer.train_ahead(next_notch_only=True)
    busy_until = time.perf_counter() - start
    if pause > max(QUIET_S, busy_until):
        quiet_start = max(QUIET_S, busy_until)
        start = time.perf_counter()
        steps += explorer.train_ahead(seconds=pause - quiet_start)
        busy_until = quiet_start + time.perf_counter() - start
    return steps, max(0.0, busy_until - pause)


def measure_explorer(read_pause: float = READ_PAUSE_S) -> dict:
    from widgets.lessons.beginner_2.controls import make_accumulation_explorer

    load_at_start = [round(x, 2) for x in psutil.getloadavg()]
    start = time.perf_counter()
    explorer = make_accumulation_explorer(accumulation_steps=4, micro_batch_size=8)
    build = time.perf_counter() - start
    seen = {explorer.current_config()}
    changes, cold, warm, ahead, on_path, steps_ahead, last = [], [], [], [], [], 0, None
    for name, value in slider_script():
        steps, waited = work_ahead_while_paused(explorer, learner_pause((name, value), last, read_pause))
        steps_ahead += steps
        last = (name, value)
        ready = explorer.trained_settings()
        before = explorer.image.value
        start = time.perf_counter()
        explorer.controls[name].value = value
        elapsed = time.perf_counter() - start + waited
        if explorer.image.value is before:
            raise RuntimeError(f"setting {name}={value} did not update the figure")
        if explorer.errors.outputs:
            raise RuntimeError(f"setting {name}={value} raised: {explorer.errors.outputs}")
        config = explorer.current_config()
        (warm if config in seen else cold).append(elapsed)
        if config not in seen:
            (ahead if config in ready else on_path).append(elapsed)
        seen.add(config)
        changes.append(elapsed)
    blit, full = [], []
    for _ in range(len(changes)):
        start = time.perf_counter()
        explorer.render()
        blit.append(time.perf_counter() - start)
        start = time.perf_counter()
        explorer.render(full=True)
        full.append(time.perf_counter() - start)
    result = {
        "build_s": round(build, 2),
        "slider_change": summary(changes),
        "slider_change_cold": summary(cold),
        "slider_change_cached": summary(warm),
        "slider_change_cold_trained_ahead": summary(ahead),
        "slider_change_cold_trained_on_the_path": summary(on_path),
        "bare_redraw_blit": summary(blit),
        "bare_redraw_full": summary(full),
        "learner_pause_s": {"sweep": SWEEP_PAUSE_S, "read": read_pause},
        "steps_ahead": steps_ahead,
        "load_average_1_5_15": {"start": load_at_start, "end": [round(x, 2) for x in psutil.getloadavg()]},
    }
    for kind in ("slider_change_cold", "slider_change_cached"):
        for stat in ("median_ms", "p95_ms"):
            result[f"ratio_{kind[14:]}_{stat[:-3]}_to_bare_blit"] = round(result[kind][stat] / result["bare_redraw_blit"][stat], 2)
    result["ratio_median_to_bare_blit"] = round(result["slider_change"]["median_ms"] / result["bare_redraw_blit"]["median_ms"], 2)
    result["ratio_median_to_bare_full"] = round(result["slider_change"]["median_ms"] / result["bare_redraw_full"]["median_ms"], 2)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--skip-notebooks", "--explorer-only", action="store_true", help="measure only the explorer")
    parser.add_argument("--read-pause", type=float, default=READ_PAUSE_S,
                        help=f"the learner's pause after a jump or a switch, in seconds (default {READ_PAUSE_S})")
    args = parser.parse_args()

    results = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    results["machine"] = {
        "cpus": psutil.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(terse=True),
    }
    # the map in start-here quotes "command" and "measured_on" for the notebook times: an explorer-only
    # run leaves them alone and records its own
    key = "explorer_command" if args.skip_notebooks else "command"
    results[key] = " ".join(["python", "benchmarks/benchmark.py", *sys.argv[1:]])
    results["explorer_measured_on" if args.skip_notebooks else "measured_on"] = time.strftime("%Y-%m-%d")
    explorer = measure_explorer(args.read_pause)
    results["explorer"] = explorer
    print("explorer, in the kernel (ms)      median    p95    n")
    for key in ("slider_change", "slider_change_cold", "slider_change_cold_trained_ahead",
                "slider_change_cold_trained_on_the_path", "slider_change_cached", "bare_redraw_blit", "bare_redraw_full"):
        s = explorer[key]
        if s["n"]:
            print(f"  {key:<40} {s['median_ms']:7.1f} {s['p95_ms']:7.1f} {s['n']:4d}")
        else:
            print(f"  {key:<40} {'-':>7} {'-':>7} {0:4d}")
    print(f"  median / bare blit redraw = {explorer['ratio_median_to_bare_blit']}x; "
          f"/ bare full redraw = {explorer['ratio_median_to_bare_full']}x")
    print(f"  first visits / bare blit redraw: median {explorer['ratio_cold_median_to_bare_blit']}x, "
          f"p95 {explorer['ratio_cold_p95_to_bare_blit']}x (pauses {explorer['learner_pause_s']} s, load {explorer['load_average_1_5_15']})")

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
