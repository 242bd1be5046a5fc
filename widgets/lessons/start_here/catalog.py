"""The map of the lab: every notebook in reading order, its tier, a line on what it gives, its measured run time."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from widgets.core.measured import benchmark_results_path
from widgets.core.views import Table

RESULTS_PATH = benchmark_results_path()
NOT_MEASURED = "not measured yet"


@dataclass(frozen=True)
class NotebookEntry:
    """One notebook of the map; `path` is relative to the repository root."""

    path: str
    tier: str
    title: str
    description: str


TIERS = {"start": "Start", "beginner": "Beginner", "developer": "Developer", "researcher": "Researcher"}

NOTEBOOKS: tuple[NotebookEntry, ...] = (
    NotebookEntry(
        "notebooks/00_start_here.ipynb", "start", "Start here",
        "the idea and bricks to touch, this map, the words the lab uses, the doctor",
    ),
    NotebookEntry(
        "notebooks/beginner_1_carrying_bricks.ipynb", "beginner", "Carrying bricks",
        "why accumulation exists, bricks on a staircase, .grad piling up in PyTorch, guesses you commit to",
    ),
    NotebookEntry(
        "notebooks/beginner_2_watch_a_model_learn.ipynb", "beginner", "Watch a model learn",
        "a small model trained three ways, live; one mistake switched on; a fair race; what it costs",
    ),
    NotebookEntry(
        "notebooks/developer_1_proving_equivalence.ipynb", "developer", "The loop, its mistakes, the proof",
        "the correct loop to copy, the classic mistakes in one table, the auditor, then the allclose proof",
    ),
    NotebookEntry(
        "notebooks/developer_2_training_loop.ipynb", "developer", "The training loop, line by line",
        "the window's boundary, a short last window, a stream, logging, clipping, schedules, mixed precision",
    ),
    NotebookEntry(
        "notebooks/developer_3_bug_gallery.ipynb", "developer", "The mistake gallery",
        "each classic mistake as a diff of the correct loop, its symptom, its fix; which ones AdamW hides",
    ),
    NotebookEntry(
        "notebooks/developer_4_frameworks.ipynb", "developer", "Your framework, audited",
        "what Hugging Face Accelerate and PyTorch Lightning do with your accumulation, under the auditor",
    ),
    NotebookEntry(
        "notebooks/researcher_1_why_exact.ipynb", "researcher", "Why it is exact",
        "the n_i/n weights derived; token-count normalisation (the 2024 bug) and its fix; precision against K",
    ),
    NotebookEntry(
        "notebooks/researcher_2_where_it_breaks.ipynb", "researcher", "Where it breaks",
        "batch norm, in-batch negatives and gradient caching, dropout, what runs once per update",
    ),
    NotebookEntry(
        "notebooks/researcher_3_noise_and_critical_batch.ipynb", "researcher", "Gradient noise and the critical batch",
        "the noise scale read off the accumulation window, the critical batch, learning-rate scaling",
    ),
    NotebookEntry(
        "notebooks/researcher_4_memory_and_time.ipynb", "researcher", "Memory and time, measured",
        "the four memory terms counted, checkpointing, float32 against bfloat16 time, a (b, K) planner",
    ),
    NotebookEntry(
        "notebooks/researcher_5_many_machines.ipynb", "researcher", "Many machines",
        "a real two-process data-parallel run with no_sync, its all-reduces counted",
    ),
    NotebookEntry(
        "notebooks/researcher_6_across_ranks.ipynb", "researcher", "Across ranks: who divides by what",
        "unequal token counts on two processes, two fixes, the division bugs of real trainers",
    ),
    NotebookEntry(
        "notebooks/researcher_7_shards_and_stages.ipynb", "researcher", "Shards and stages",
        "sharded data parallelism with gradient sync on and off, pipeline schedules and their idle time",
    ),
    NotebookEntry(
        "notebooks/researcher_8_rl_and_moe_losses.ipynb", "researcher", "Losses that see the batch",
        "reinforcement-learning and mixture-of-experts losses under accumulation, and their normalisers",
    ),
    NotebookEntry(
        "notebooks/researcher_9_adam_when_k_changes.ipynb", "researcher", "Adam when K changes",
        "how to rescale Adam when the effective batch grows, and schedules of K itself",
    ),
)


def catalog_table(results_path: str | Path = RESULTS_PATH) -> Table:
    """The map of the lab as a table: tier, the notebook (a link), what it gives, its run time as measured."""
    path = Path(results_path)
    results = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}  # until the benchmark runs
    times = {name: entry["seconds"] for name, entry in results.get("notebooks", {}).items()}
    rows = [[TIERS[entry.tier], f"[{entry.title}]({entry.path.removeprefix('notebooks/')})", entry.description,
             f"{times[entry.path]:.1f} s" if entry.path in times else NOT_MEASURED] for entry in NOTEBOOKS]
    where = [f"on {results['measured_on']}" if "measured_on" in results else "",
             f"with {results['machine']['cpus']} CPUs" if "cpus" in results.get("machine", {}) else "",
             f"by `{results['command']}`" if "command" in results else ""]
    where = [part for part in where if part]
    note = "Run times measured from a fresh kernel " + ", ".join(where) + "." if times and where else ""
    return Table(["tier", "notebook", "what you get", "runs in"], rows, right=frozenset({"runs in"}), note=note)
