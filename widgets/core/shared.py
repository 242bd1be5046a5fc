"""Constants and one-line helpers that several layers share, defined once.

torch-free at import: `real_tokens` works on anything with `!=` and `.sum()` (a torch tensor).
"""
from __future__ import annotations

from pathlib import Path

# The target PyTorch's cross_entropy leaves out (padding, prompt tokens): its `ignore_index` default.
IGNORE_INDEX = -100

# The explorer's slider ranges and options, which share codes and presets are checked against too.
K_RANGE = (1, 16)  # accumulation_steps
B_RANGE = (1, 64)  # micro_batch_size
LR_RANGE = (0.001, 10.0)  # learning_rate
# The explorer's max_grad_norm choices (off, or one of these); the gradients there are about 0.1 to 2.
# A share code stores a choice by its index: a new one is appended.
CLIP_OPTIONS = (0.05, 0.1, 0.2, 0.5, 1.0, 2.0)


def real_tokens(targets) -> int:
    """The real (non-padding) targets in a tensor of token targets: those != IGNORE_INDEX."""
    return int((targets != IGNORE_INDEX).sum())


def benchmark_results_path() -> Path:
    """The notebooks' measured run times and memory peaks: the checkout's benchmarks/results.json (an
    editable install, `make lab`), else the copy a wheel built from the checkout carries (setup.py), the
    one a lab installed with pip has. Either may be missing: readers fall back gracefully."""
    checkout = Path(__file__).resolve().parents[2] / "benchmarks" / "results.json"
    return checkout if checkout.exists() else Path(__file__).with_name("benchmark_results.json")


# The measurements a notebook reads (benchmarks/results/<name>), which a wheel carries too (setup.py).
PACKAGED_RESULTS = ("planner_peak.json",)


def results_path(name: str) -> Path:
    """benchmarks/results/<name> of the checkout (an editable install), else the copy a wheel built from the
    checkout carries (widgets/core/results/<name>, setup.py): what a lab installed with pip, on Colab or
    Kaggle, has. `name` is one of PACKAGED_RESULTS."""
    if name not in PACKAGED_RESULTS:
        raise ValueError(f"name must be one of {list(PACKAGED_RESULTS)}, got {name!r}")
    checkout = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / name
    return checkout if checkout.exists() else Path(__file__).with_name("results") / name
