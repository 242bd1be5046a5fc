"""Where the lab's measured results live: the checkout's benchmarks/, else the copy a wheel carries (setup.py:
a lab installed with pip, on Colab or Kaggle). Either may be missing, and readers fall back."""
from __future__ import annotations

from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[2] / "benchmarks"

# The measurements a notebook reads (benchmarks/results/<name>), which a wheel carries too.
PACKAGED_RESULTS = ("planner_peak.json",)


def benchmark_results_path() -> Path:
    """The notebooks' measured times and memory: benchmarks/results.json, else widgets/core/benchmark_results.json."""
    checkout = CHECKOUT / "results.json"
    return checkout if checkout.exists() else Path(__file__).with_name("benchmark_results.json")


def results_path(name: str) -> Path:
    """benchmarks/results/<name>, else widgets/core/results/<name>; `name` is one of PACKAGED_RESULTS."""
    if name not in PACKAGED_RESULTS:
        raise ValueError(f"name must be one of {list(PACKAGED_RESULTS)}, got {name!r}")
    checkout = CHECKOUT / "results" / name
    return checkout if checkout.exists() else Path(__file__).with_name("results") / name
