"""Write the Kubernetes sizing of instructor/hub.md from the simulated room's measurements.

    python hub/sizing.py        # after benchmarks/hub_room.py (make hub-room does both)

Reads benchmarks/results/hub_room.json (and, when present, memory_limit.json: the heaviest
notebook's peak), replaces the part of instructor/hub.md between the two sizing markers. Nothing
here was run on Kubernetes: these are Zero to JupyterHub settings derived from one machine's numbers.
"""
from __future__ import annotations

import json
import math
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
DOC = ROOT / "instructor" / "hub.md"
BEGIN, END = "<!-- sizing:begin (written by hub/sizing.py) -->", "<!-- sizing:end -->"
ROOMS = (30, 100, 300)
NODES = {"4 vCPU, 16 GiB": (4, 16), "8 vCPU, 32 GiB": (8, 32), "16 vCPU, 64 GiB": (16, 64)}
RESERVED_GIB, RESERVED_CPU = 1.5, 0.3  # kubelet, system pods and the image puller's share of a node
HEADROOM = 1.25  # above the largest measured peak: the limit a kernel is killed at


def up(value: float, step: float) -> float:
    return math.ceil(value / step - 1e-9) * step


def planned_minutes(notebooks: list[str]) -> float | None:
    """Minutes the instructor plans give these notebooks (instructor/plans.md: run + reading + widgets)."""
    plans = ROOT / "instructor" / "plans.md"
    if not plans.exists():
        return None
    text, total = plans.read_text(), 0.0
    for notebook in notebooks:
        found = re.search(r"^\| (\d+) \| [^|]*`" + re.escape(notebook) + "`", text, re.M)
        if not found:
            return None
        total += float(found[1])
    return total


def sizing(room: dict, heaviest_mb: float | None) -> dict:
    """Per-user guarantee and limit, CPU guarantee, and nodes per room size, from the measurements."""
    peak = room["peak_mb"]["learner"]
    guarantee_mb = up(peak["median"], 128)  # what a typical learner holds: the scheduler packs by it
    limit_mb = up(max(peak["max"], heaviest_mb or 0) * HEADROOM, 256)  # the largest seen, with headroom
    minutes = planned_minutes(list(room["notebook_s"]))  # the class time these notebooks take
    cpu = room.get("learner_cpu_s", {}).get("median")
    # a learner's CPU seconds spread over the class time the plans give these notebooks (reading included)
    cpu_guarantee = round(max(0.05, up(cpu / (minutes * 60), 0.05)), 2) if cpu and minutes else 0.5
    busy_s = sum(nb["median"] for nb in room["notebook_s"].values())
    running_cores = cpu / busy_s if cpu and busy_s else 1.0  # what one learner's cells use while they run
    nodes = {}
    for label, (vcpu, gib) in NODES.items():
        per_node = min(int((gib - RESERVED_GIB) * 1024 // guarantee_mb), int((vcpu - RESERVED_CPU) // cpu_guarantee))
        nodes[label] = {"learners_per_node": per_node, **{str(n): math.ceil(n / per_node) for n in ROOMS},
                        "all_at_once": round(max(1.0, per_node * running_cores / (vcpu - RESERVED_CPU)), 1)}
    return {"running_cores": round(running_cores, 2), "minutes": minutes, "guarantee_mb": int(guarantee_mb), "limit_mb": int(limit_mb), "cpu_guarantee": cpu_guarantee,
            "cpu_limit": 2, "nodes": nodes, "hub_mb": room["peak_mb"]["hub"], "proxy_mb": room["peak_mb"]["proxy"]}


def section(room: dict, heaviest_mb: float | None) -> str:
    s = sizing(room, heaviest_mb)
    peak = room["peak_mb"]["learner"]
    lines = [
        BEGIN,
        f"Measured by `{room['command']}` on {room['measured_on']} ({room['machine']}): {room['learners']} learners, "
        f"failures: {len(room['failures'])}. Per learner (all their processes): peak {peak['min']}–{peak['max']} MB, "
        f"median {peak['median']} MB; CPU {room.get('learner_cpu_s', {}).get('median', '?')} s each (median); the hub "
        f"{room['peak_mb']['hub']} MB, the proxy {room['peak_mb']['proxy']} MB, the services {room['peak_mb']['services']} MB. "
        f"All spawned after {room['all_spawned_s']} s; start-here and beginner_2 took "
        + ", ".join(f"{v['median']} s" for v in room["notebook_s"].values()) + " (median, all learners at once).",
        "",
        "Zero to JupyterHub `config.yaml` (not run here: derived from the numbers above):",
        "",
        "```yaml",
        "singleuser:",
        "  memory:",
        f"    guarantee: {s['guarantee_mb']}M   # the measured median peak, rounded up to 128 MB",
        f"    limit: {s['limit_mb']}M       # the largest peak measured (room or heaviest notebook) x {HEADROOM}",
        "  cpu:",
        f"    guarantee: {s['cpu_guarantee']}    # a learner's CPU seconds / the {s['minutes']:.0f} min the plans give these notebooks",
        f"    limit: {s['cpu_limit']}",
        "hub:",
        "  resources:",
        f"    requests: {{memory: {up(s['hub_mb'] * 2, 128):.0f}M, cpu: 0.2}}   # twice the measured hub peak",
        "proxy:",
        "  chp:",
        "    resources:",
        f"      requests: {{memory: {up(max(s['proxy_mb'], 64) * 2, 64):.0f}M, cpu: 0.2}}",
        "```",
        "",
        f"User nodes (each keeps {RESERVED_GIB} GiB and {RESERVED_CPU} CPU for the system; learners packed by their "
        "guarantees), plus one small core node for the hub and proxy:",
        "",
        "| node | learners per node | " + " | ".join(f"{n} learners" for n in ROOMS) + " | everyone runs at once |",
        "|---|---|" + "---|" * len(ROOMS) + "---|",
    ]
    for label, row in s["nodes"].items():
        lines.append(f"| {label} | {row['learners_per_node']} | " + " | ".join(f"{row[str(n)]} node{'s' * (row[str(n)] != 1)}" for n in ROOMS)
                     + f" | {row['all_at_once']}x slower |")
    lines += ["", f"While its cells run, a learner's kernel used {s['running_cores']} cores (CPU seconds / run seconds); "
              "the last column is how much longer a Run All takes when every learner on a full node runs at once. "
              "Pack fewer learners per node (a higher CPU guarantee) if the lesson has everyone run together."]
    if heaviest_mb:
        lines += ["", f"The limit also covers the heaviest notebook measured alone ({heaviest_mb:.0f} MB, "
                  "benchmarks/results/memory_limit.json); the simulated room ran only start-here and beginner_2."]
    lines.append(END)
    return "\n".join(lines)


def main() -> None:
    room = json.loads((RESULTS / "hub_room.json").read_text())
    heaviest = None
    memory = RESULTS / "memory_limit.json"
    if memory.exists():
        heaviest = json.loads(memory.read_text()).get("peak_rss_mb")
    text = DOC.read_text()
    start, end = text.index(BEGIN), text.index(END) + len(END)
    DOC.write_text(text[:start] + section(room, heaviest) + text[end:])
    print(f"wrote the sizing of {DOC.relative_to(ROOT)} from {room['learners']} learners measured {room['measured_on']}")


if __name__ == "__main__":
    main()
