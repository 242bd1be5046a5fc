"""Speed and memory of the lab, measured (never asserted in timed tests).

    python benchmarks/benchmark.py                 # explorer latency + every notebook
    python benchmarks/benchmark.py --skip-notebooks

Prints, and writes to benchmarks/results.json:
- slider change -> figure updated, in the kernel: the time from setting a control's value (what
  a slider move does) until the new PNG sits in the explorer's Image widget, over a scripted
  sequence of changes that mixes first visits (cold: three regimes trained) and revisits
  (cached record: only a redraw), next to bare redraws of the same figure in the same run;
- each notebook's run time from kernel start, and the peak memory of its kernel plus any worker
  processes it starts (see memory.py): the tree's resident pages, each counted once (the budget's
  reading), and the per-process RSS and PSS summed.
Budgets: median <= 100 ms, p95 <= 250 ms; beginner and developer notebooks <= 25 s and <= 600 MB
(issue 8), developer_4 <= 30 s (issue 11), researcher 1-2 <= 30 s and <= 600 MB (issue 9),
researcher 3-5 <= 45 s and <= 800 MB with the DDP workers (issue 10). `python benchmarks/memory.py
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
    return {"n": len(ms), "median_ms": round(statistics.median(ms), 1), "p95_ms": round(percentile(ms, 95), 1)}


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


def measure_explorer() -> dict:
    from widgets.controls.explorer import make_accumulation_explorer

    start = time.perf_counter()
    explorer = make_accumulation_explorer(accumulation_steps=4, micro_batch_size=8)
    build = time.perf_counter() - start
    seen = {explorer.current_config()}
    changes, cold, warm = [], [], []
    for name, value in slider_script():
        before = explorer.image.value
        start = time.perf_counter()
        explorer.controls[name].value = value
        elapsed = time.perf_counter() - start
        if explorer.image.value is before:
            raise RuntimeError(f"setting {name}={value} did not update the figure")
        if explorer.errors.outputs:
            raise RuntimeError(f"setting {name}={value} raised: {explorer.errors.outputs}")
        config = explorer.current_config()
        (warm if config in seen else cold).append(elapsed)
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
        "bare_redraw_blit": summary(blit),
        "bare_redraw_full": summary(full),
    }
    result["ratio_median_to_bare_blit"] = round(result["slider_change"]["median_ms"] / result["bare_redraw_blit"]["median_ms"], 2)
    result["ratio_median_to_bare_full"] = round(result["slider_change"]["median_ms"] / result["bare_redraw_full"]["median_ms"], 2)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--skip-notebooks", action="store_true", help="measure only the explorer")
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
    results[key] = "python benchmarks/benchmark.py" + (" --skip-notebooks" if args.skip_notebooks else "")
    results["explorer_measured_on" if args.skip_notebooks else "measured_on"] = time.strftime("%Y-%m-%d")
    explorer = measure_explorer()
    results["explorer"] = explorer
    print("explorer, in the kernel (ms)      median    p95    n")
    for key in ("slider_change", "slider_change_cold", "slider_change_cached", "bare_redraw_blit", "bare_redraw_full"):
        s = explorer[key]
        print(f"  {key:<30} {s['median_ms']:7.1f} {s['p95_ms']:7.1f} {s['n']:4d}")
    print(f"  median / bare blit redraw = {explorer['ratio_median_to_bare_blit']}x; "
          f"/ bare full redraw = {explorer['ratio_median_to_bare_full']}x")

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
