"""Write the Kubernetes sizing of instructor/hub.md from the simulated room's measurements.

    python hub/sizing.py        # after benchmarks/hub_room.py (make hub-room does both)

Reads the largest room of benchmarks/results/hub_room_<N>.json (and, when present, memory_limit.json:
the heaviest notebook's peak), replaces the part of instructor/hub.md between the two sizing markers. Nothing
here was run on Kubernetes: these are Zero to JupyterHub settings derived from one machine's numbers.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
DOC = ROOT / "instructor" / "hub.md"
BEGIN, END = "<!-- sizing:begin (written by hub/sizing.py) -->", "<!-- sizing:end -->"
ROOMS = (30, 100, 300)
NODES = {"4 vCPU, 16 GiB": (4, 16), "8 vCPU, 32 GiB": (8, 32), "16 vCPU, 64 GiB": (16, 64)}
RESERVED_GIB, RESERVED_CPU = 1.5, 0.3  # kubelet, system pods and the image puller's share of a node
HEADROOM = 1.25  # above the largest measured peak: the limit a kernel is killed at
PACE_S = (2.0, 4.0)  # seconds a learner of benchmarks/hub_room.py pauses between two changes (uniform)


def up(value: float, step: float) -> float:
    return math.ceil(value / step - 1e-9) * step


def sizing(room: dict, heaviest_mb: float | None) -> dict:
    """Per-user guarantee and limit, CPU guarantee, and nodes per room size, from a room measured at a
    learner's pace (benchmarks/hub_room.py)."""
    pss = room["pss_mb"]  # shared pages split among the processes that map them: what packing really costs
    guarantee_mb = up(pss["median"], 128)  # what a typical learner holds: the scheduler packs by it
    limit_mb = up(max(room["peak_mb"]["learner"]["max"], heaviest_mb or 0) * HEADROOM, 256)  # resident, with headroom
    pause_ms = 1000 * sum(PACE_S) / 2  # a learner's mean time between two changes
    cpu_guarantee = round(max(0.05, up(room["cpu_ms_per_change"]["median"] / pause_ms, 0.05)), 2)
    nodes = {}
    for label, (vcpu, gib) in NODES.items():
        per_node = min(int((gib - RESERVED_GIB) * 1024 // guarantee_mb), int((vcpu - RESERVED_CPU) // cpu_guarantee))
        nodes[label] = {"learners_per_node": per_node, **{str(n): math.ceil(n / per_node) for n in ROOMS}}
    return {"guarantee_mb": int(guarantee_mb), "limit_mb": int(limit_mb), "cpu_guarantee": cpu_guarantee,
            "cpu_limit": 2, "nodes": nodes, "hub_mb": room["peak_mb"]["hub"], "proxy_mb": room["peak_mb"]["proxy"]}


def section(room: dict, heaviest_mb: float | None) -> str:
    s = sizing(room, heaviest_mb)
    pss, lat = room["pss_mb"], room["latency_ms"]
    lines = [
        BEGIN,
        f"Measured by `{room['command']}` on {room['measured_on']} ({room['machine']}): {room['learners']} learners "
        f"each changing a setting every {PACE_S[0]:g}-{PACE_S[1]:g} s for {room['paced_minutes']:g} minutes "
        f"({room['changes']} changes), failures: {len(room['failures'])}. A change answered in {lat['median']} ms "
        f"(median), {lat['p95']} ms (p95), the slowest learner's p95 {room['learner_p95_ms']['max']} ms; "
        f"{room['cpu_ms_per_change']['median']} ms of CPU per change (median); 1-minute load "
        f"{room['load_1min'].get('mean')} (mean). Per learner (all their processes): PSS {pss['min']}–{pss['max']} MB, "
        f"resident peak up to {room['peak_mb']['learner']['max']} MB; the hub {room['peak_mb']['hub']} MB, the proxy "
        f"{room['peak_mb']['proxy']} MB, the services {room['peak_mb']['services']} MB.",
        "",
        "Zero to JupyterHub `config.yaml` (not run here: derived from the numbers above):",
        "",
        "```yaml",
        "singleuser:",
        "  memory:",
        f"    guarantee: {s['guarantee_mb']}M   # the measured median PSS, rounded up to 128 MB",
        f"    limit: {s['limit_mb']}M       # the largest resident peak (room or heaviest notebook) x {HEADROOM}",
        "  cpu:",
        f"    guarantee: {s['cpu_guarantee']}    # CPU per change / the mean pause between changes",
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
        "| node | learners per node | " + " | ".join(f"{n} learners" for n in ROOMS) + " |",
        "|---|---|" + "---|" * len(ROOMS),
    ]
    for label, row in s["nodes"].items():
        lines.append(f"| {label} | {row['learners_per_node']} | "
                     + " | ".join(f"{row[str(n)]} node{'s' * (row[str(n)] != 1)}" for n in ROOMS) + " |")
    lines += ["", "The CPU guarantee is a learner at the pace measured: a lesson where everyone presses Run All at "
              "once needs more (pack fewer learners per node)."]
    if heaviest_mb:
        lines += ["", f"The limit also covers the heaviest notebook measured alone ({heaviest_mb:.0f} MB, "
                  "benchmarks/results/memory_limit.json); the room ran beginner_1 and beginner_2."]
    lines.append(END)
    return "\n".join(lines)


def main() -> None:
    rooms = [json.loads(path.read_text()) for path in RESULTS.glob("hub_room_*.json")]
    room = max((r for r in rooms if "pss_mb" in r), key=lambda r: r["learners"])  # the largest room measured
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
