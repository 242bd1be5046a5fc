"""Write the Kubernetes sizing of instructor/hub.md from the simulated room's measurements.

    python hub/sizing.py        # after benchmarks/hub_room.py (make hub-room does both)

Reads the largest room of benchmarks/results/hub_room_<N>.json (and, when present, memory_limit.json:
the heaviest notebook's peak), replaces the part of instructor/hub.md between the two sizing markers. Nothing
here was run on Kubernetes: these are Zero to JupyterHub settings derived from one machine's numbers. A pod
is one learner, with no room's fork server to share: its memory comes from the room measured with a fork
server per learner (PODS), its CPU from the largest room.
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
PODS = RESULTS / "hub_room_40_own_fork_servers.json"  # 40 learners, each server forking from its own fork server
PACE_S = (2.0, 4.0)  # seconds a learner of benchmarks/hub_room.py pauses between two changes (uniform)


def up(value: float, step: float) -> float:
    return math.ceil(value / step - 1e-9) * step


def sizing(room: dict, heaviest_mb: float | None, pods: dict) -> dict:
    """Per-user guarantee and limit, CPU guarantee, and nodes per room size, from rooms measured at a
    learner's pace (benchmarks/hub_room.py): `pods` with a fork server per learner, as a pod is."""
    pss = pods["pss_mb"]  # shared pages split among the processes that map them: what packing really costs
    guarantee_mb = up(pss["median"], 128)  # what a typical learner holds: the scheduler packs by it
    # PSS, not resident sizes: a learner's kernels share their fork server's pages (hub/fork_kernels.py),
    # which summing each process's resident size would count three times
    limit_mb = up(max(pss["max"], heaviest_mb or 0) * HEADROOM, 256)
    pause_ms = 1000 * sum(PACE_S) / 2  # a learner's mean time between two changes
    cpu_guarantee = round(max(0.05, up(room["cpu_ms_per_change"]["median"] / pause_ms, 0.05)), 2)
    nodes = {}
    for label, (vcpu, gib) in NODES.items():
        per_node = min(int((gib - RESERVED_GIB) * 1024 // guarantee_mb), int((vcpu - RESERVED_CPU) // cpu_guarantee))
        nodes[label] = {"learners_per_node": per_node, **{str(n): math.ceil(n / per_node) for n in ROOMS}}
    return {"guarantee_mb": int(guarantee_mb), "limit_mb": int(limit_mb), "cpu_guarantee": cpu_guarantee,
            "cpu_limit": 2, "nodes": nodes, "hub_mb": room["peak_mb"]["hub"], "proxy_mb": room["peak_mb"]["proxy"]}


def rooms_table(rooms: list[dict]) -> list[str]:
    """The rooms measured, side by side: what a learner waited, what a change cost, what a learner held."""
    lines = ["| learners | changes | answer: median / p95 | slowest learner's p95 | CPU per change: all "
             "(server + kernels) | PSS per learner: median (max) | load: mean / max | failures, left |",
             "|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in rooms:
        lat, cpu, by, pss, load = (r["latency_ms"], r["cpu_ms_per_change"], r.get("cpu_ms_by_process", {}),
                                   r["pss_mb"], r["load_1min"])
        parts = " + ".join(f"{by[k]['median']}" for k in ("server", "kernels") if by.get(k, {}).get("n"))
        lines.append(f"| {r['learners']} | {r['changes']} | {lat['median']} / {lat['p95']} ms | "
                     f"{r['learner_p95_ms']['max']} ms | {cpu['median']} ms ({parts}) | {pss['median']} ({pss['max']}) MB | "
                     f"{load.get('mean')} / {load.get('max')} | {len(r['failures'])}, {len(r['left_processes'])} |")
    return lines


def section(rooms: list[dict], heaviest_mb: float | None, pods: dict) -> str:
    room = rooms[-1]  # the largest room measured sizes the cluster
    s = sizing(room, heaviest_mb, pods)
    pss, lat = room["pss_mb"], room["latency_ms"]
    lines = [
        BEGIN,
        f"Measured by `python benchmarks/hub_room.py --learners N` (`make hub-room N=…`) on {room['measured_on']} "
        f"({room['machine']}): each learner ran beginner_1 and beginner_2, then changed a setting every "
        f"{PACE_S[0]:g}-{PACE_S[1]:g} s for {room['paced_minutes']:g} minutes. An answer is the time from the "
        "change leaving the learner to the new picture arriving; CPU is all of a learner's processes over the "
        "paced minutes, per change; PSS splits each shared page among the processes that map it. The load is "
        "the 1-minute load average sampled in the paced minutes: it starts high with the notebooks' runs "
        "and falls, and the room's own meter (every learner process's memory, every 2 s) runs on the same cores.",
        "",
        *rooms_table(rooms),
        "",
        f"In the largest room ({room['learners']} learners), at a learner's peak: their server "
        f"{_kind(room, 'server')} MB, their fork server {_kind(room, 'fork server')} MB and their kernels "
        f"{_kind(room, 'kernels')} MB together (medians); the room's fork server "
        f"{room['peak_mb'].get('room_fork_server_pss', '?')} MB (PSS, once for the room); the hub "
        f"{room['peak_mb']['hub']} MB, the proxy {room['peak_mb']['proxy']} MB, the services "
        f"{room['peak_mb']['services']} MB (resident). A change answered in "
        f"{lat['median']} ms (median), {lat['p95']} ms (p95); PSS per learner {pss['min']}–{pss['max']} MB.",
        "",
        "Zero to JupyterHub `config.yaml` (not run here: derived from the numbers above). A pod holds one "
        "learner, so no room's fork server shares torch among them: the image's Jupyter server needs the lines "
        "of `hub/singleuser_config.py` that load `hub/fork_kernels.py`, and its server starts a fork server of "
        "its own. The memory below is from the room measured that way ("
        f"{pods['learners']} learners on {pods['measured_on']}, `benchmarks/results/{PODS.name}`): "
        f"{pods['pss_mb']['median']} MB PSS per learner (median), {pods['pss_mb']['max']} MB at most.",
        "",
        "```yaml",
        "singleuser:",
        "  memory:",
        f"    guarantee: {s['guarantee_mb']}M   # the measured median PSS, rounded up to 128 MB",
        f"    limit: {s['limit_mb']}M       # the largest PSS in the room or the heaviest notebook's peak, x {HEADROOM}",
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


def _kind(room: dict, kind: str) -> object:
    return room.get("pss_by_process_mb", {}).get(kind, {}).get("median", "?")


def measured_rooms() -> list[dict]:
    """The rooms of benchmarks/results/hub_room_<N>.json measured at a learner's pace, the smallest first."""
    rooms = sorted((json.loads(path.read_text()) for path in RESULTS.glob("hub_room_*.json")
                    if re.fullmatch(r"hub_room_\d+", path.stem)), key=lambda r: r["learners"])
    return [r for r in rooms if "pss_mb" in r]


def main() -> None:
    rooms = measured_rooms()
    heaviest = None
    memory = RESULTS / "memory_limit.json"
    if memory.exists():
        heaviest = json.loads(memory.read_text()).get("peak_rss_mb")
    text = DOC.read_text()
    start, end = text.index(BEGIN), text.index(END) + len(END)
    DOC.write_text(text[:start] + section(rooms, heaviest, json.loads(PODS.read_text())) + text[end:])
    print(f"wrote the sizing of {DOC.relative_to(ROOT)} from {rooms[-1]['learners']} learners measured "
          f"{rooms[-1]['measured_on']}")


if __name__ == "__main__":
    main()
