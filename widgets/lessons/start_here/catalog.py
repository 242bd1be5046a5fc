"""The map of the lab: every notebook in reading order, its tier, a one-line description, its run time.

Run times are not typed in by hand: they are read from `benchmarks/results.json`, which the
benchmark script writes after executing each notebook from a fresh kernel (a lab installed with pip,
without the checkout, reads the copy its wheel carries). Until a notebook has been measured, the map
says "not measured yet". Pure Python: no torch, matplotlib or ipywidgets.
"""
from __future__ import annotations

import json
import math
import numbers
from dataclasses import dataclass
from pathlib import Path

from widgets.core.shared import benchmark_results_path

RESULTS_PATH = benchmark_results_path()
NOT_MEASURED = "not measured yet"


@dataclass(frozen=True)
class Tier:
    """A group of notebooks for one kind of reader."""

    name: str
    audience: str
    planned: bool = False  # True while no notebook of the tier is written


@dataclass(frozen=True)
class NotebookEntry:
    """One notebook of the map; `path` is relative to the repository root."""

    path: str
    tier: str
    title: str
    description: str


TIERS: dict[str, Tier] = {
    "start": Tier("Start", "everyone"),
    "beginner": Tier("Beginner", "anyone curious: no maths, plain English, pictures you can play with"),
    "developer": Tier("Developer", "people who write training loops: the code, proofs by allclose, the classic bugs"),
    "researcher": Tier(
        "Researcher",
        "why it is exact and where it breaks: batch norm, in-batch negatives, token-count "
        "normalisation, gradient noise scale, memory and time, DDP no_sync",
    ),
}

NOTEBOOKS: tuple[NotebookEntry, ...] = (
    NotebookEntry(
        "notebooks/00_start_here.ipynb", "start", "Start here",
        "what the lab teaches, the tiers, this map, the glossary, how to use the widgets",
    ),
    NotebookEntry(
        "notebooks/beginner_1_carrying_bricks.ipynb", "beginner", "Carrying bricks",
        "why accumulation exists, the bricks analogy on a staircase you can play (the pile is a sum, the update divides it), .grad adding up in PyTorch, predictions and five checked questions",
    ),
    NotebookEntry(
        "notebooks/beginner_2_watch_a_model_learn.ipynb", "beginner", "Watch a model learn",
        "the live explorer on a small real model: accumulated vs big batch vs small batch, a bug, SGD vs AdamW, fair races at equal examples and equal time, memory in bytes",
    ),
    NotebookEntry(
        "notebooks/developer_1_proving_equivalence.ipynb", "developer", "Proving the equivalence",
        "four micro-batches of 2 against one batch of 8 with allclose; the missing division; what allclose tests; rounding over 100 seeds",
    ),
    NotebookEntry(
        "notebooks/developer_2_training_loop.ipynb", "developer", "The training loop",
        "the boundary `if`, the uneven last window, a stream without a length, logging, clipping, schedules, mixed precision, each measured",
    ),
    NotebookEntry(
        "notebooks/developer_3_bug_gallery.ipynb", "developer", "The bug gallery",
        "each classic accumulation mistake as a number and a picture, then its fix; the same bugs under AdamW; your own loop checked",
    ),
    NotebookEntry(
        "notebooks/developer_4_frameworks.ipynb", "developer", "Your framework, audited",
        "Accelerate's and Lightning's accumulation under the loop auditor: the final window, steps, clipping, logs",
    ),
    NotebookEntry(
        "notebooks/researcher_1_why_exact.ipynb", "researcher", "Why it is exact",
        "the weights n_i/n derived and checked; token-count normalisation (the 2024 bug) and its fix; precision against K",
    ),
    NotebookEntry(
        "notebooks/researcher_2_where_it_breaks.ipynb", "researcher", "Where it breaks",
        "batch norm (ghost BN of size b), in-batch negatives and gradient caching, dropout, what runs once per update",
    ),
    NotebookEntry(
        "notebooks/researcher_3_noise_and_critical_batch.ipynb", "researcher", "Gradient noise and the critical batch",
        "B_simple from the accumulation window, checked against the exact noise scale; the critical batch over seeds on a grid whose best LR is inside it; on one device time grows with examples; LR scaling and its limit",
    ),
    NotebookEntry(
        "notebooks/researcher_4_memory_and_time.ipynb", "researcher", "Memory and time, measured",
        "the four memory terms counted from the tensors, checkpointing's peak, a transformer formula checked, fp32 vs bf16 time, a (b, K) planner with ZeRO/FSDP columns",
    ),
    NotebookEntry(
        "notebooks/researcher_5_many_machines.ipynb", "researcher", "Many machines",
        "a real two-process gloo DDP run with no_sync, all-reduces counted; ring traffic, ZeRO/FSDP, the uneven tail",
    ),
    NotebookEntry(
        "notebooks/researcher_6_across_ranks.ipynb", "researcher", "Across ranks: who divides by what",
        "unequal token counts on two real gloo ranks and their two fixes; the invariance oracle over (b, K, ranks) against the division bugs of real trackers; the auditor across ranks",
    ),
    NotebookEntry(
        "notebooks/researcher_7_shards_and_stages.ipynb", "researcher", "Shards and stages",
        "FSDP2 on two CPU ranks with gradient sync on and off: gradients allclose, collectives counted, bytes held per rank measured; pipeline schedules (GPipe, 1F1B) and their bubble",
    ),
    NotebookEntry(
        "notebooks/researcher_8_rl_and_moe_losses.ipynb", "researcher", "Losses that see the batch",
        "RL normalisers (grpo, bnpo, dr_grpo, dapo) under K micro-batches, devices and steps_per_generation; the MoE balance loss counted per window; the forgotten /K",
    ),
    NotebookEntry(
        "notebooks/researcher_9_adam_when_k_changes.ipynb", "researcher", "Adam when K changes, and K schedules",
        "Malladi's sqrt rule vs half-life betas, AdamW's tau, an equal-compute race, K warmed up from B_simple, update counting when K changes",
    ),
)


def _read_results(results_path: str | Path) -> dict:
    """The benchmark's results file as a dict; {} if it does not exist yet."""
    path = Path(results_path)
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise ValueError(f"results_path {path} is not valid JSON: {error}") from None
    if not isinstance(data, dict):
        raise ValueError(f"results_path {path} must hold a JSON object, got {type(data).__name__}")
    return data


def load_run_times(results_path: str | Path = RESULTS_PATH) -> dict[str, float]:
    """Seconds per notebook path from the benchmark's results file; {} if the file does not exist yet.

    Expected format: {"notebooks": {"notebooks/<file>.ipynb": {"seconds": <float>}, ...}, ...}.
    A file that exists but is not in that format raises a ValueError naming the file and the key.
    """
    notebooks = _read_results(results_path).get("notebooks", {})
    if not isinstance(notebooks, dict):
        raise ValueError(f"results_path {results_path}: 'notebooks' must map notebook paths to {{'seconds': number}}")
    times = {}
    for name, entry in notebooks.items():
        seconds = entry.get("seconds") if isinstance(entry, dict) else None
        is_number = isinstance(seconds, numbers.Real) and not isinstance(seconds, bool)
        if not is_number or not math.isfinite(seconds) or seconds < 0:
            raise ValueError(
                f"results_path {results_path}: notebooks[{name!r}]['seconds'] must be a number >= 0, got {seconds!r}"
            )
        times[name] = float(seconds)
    return times


def measurement_note(results_path: str | Path = RESULTS_PATH) -> str:
    """Where and when the run times were measured, from the results file ('' if it does not say)."""
    data = _read_results(results_path)
    machine = data.get("machine") if isinstance(data.get("machine"), dict) else {}
    parts = []
    if "measured_on" in data:
        parts.append(f"on {data['measured_on']}")
    if "cpus" in machine:
        parts.append(f"with {machine['cpus']} CPUs")
    if "command" in data:
        parts.append(f"by `{data['command']}`")
    return ("Run times measured from a fresh kernel " + ", ".join(parts) + ".") if parts else ""


def run_time_text(notebook_path: str, times: dict[str, float]) -> str:
    """'12.3 s' if the notebook was measured, else 'not measured yet'."""
    return f"{times[notebook_path]:.1f} s" if notebook_path in times else NOT_MEASURED


def catalog_text(results_path: str | Path = RESULTS_PATH) -> str:
    """The map of the lab, tier by tier, one line per notebook with its measured run time."""
    times = load_run_times(results_path)
    lines = []
    for key, tier in TIERS.items():
        lines.append(f"{tier.name.upper()}  ({tier.audience})")
        entries = [e for e in NOTEBOOKS if e.tier == key]
        for entry in entries:
            name = entry.path.removeprefix("notebooks/")
            lines.append(f"  {name}  [{run_time_text(entry.path, times)}]")
            lines.append(f"      {entry.title}: {entry.description}")
        if tier.planned and not entries:
            lines.append("  (planned, not written yet)")
        lines.append("")
    if load_run_times(results_path):
        lines.append(measurement_note(results_path))
    return "\n".join(lines).rstrip()
