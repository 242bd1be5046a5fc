"""Constants and one-line helpers several layers share; torch-free (`real_tokens` takes a tensor)."""
from __future__ import annotations

from pathlib import Path

# The target PyTorch's cross_entropy leaves out (padding, prompt tokens): its `ignore_index` default.
IGNORE_INDEX = -100


def real_tokens(targets) -> int:
    """The real (non-padding) targets in a tensor of token targets: those != IGNORE_INDEX."""
    return int((targets != IGNORE_INDEX).sum())


def benchmark_results_path() -> Path:
    """The notebooks' measured times and memory: the checkout's benchmarks/results.json, else the copy a
    wheel carries (setup.py); either may be missing, and readers fall back."""
    checkout = Path(__file__).resolve().parents[2] / "benchmarks" / "results.json"
    return checkout if checkout.exists() else Path(__file__).with_name("benchmark_results.json")


# The measurements a notebook reads (benchmarks/results/<name>), which a wheel carries too (setup.py).
PACKAGED_RESULTS = ("planner_peak.json",)


def results_path(name: str) -> Path:
    """benchmarks/results/<name> of the checkout, else the copy a wheel carries (widgets/core/results/,
    setup.py: a lab installed with pip, on Colab or Kaggle). `name` is one of PACKAGED_RESULTS."""
    if name not in PACKAGED_RESULTS:
        raise ValueError(f"name must be one of {list(PACKAGED_RESULTS)}, got {name!r}")
    checkout = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / name
    return checkout if checkout.exists() else Path(__file__).with_name("results") / name
