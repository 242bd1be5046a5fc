"""What each learner may hold, enforced with what this machine has (instructor/hub.md, "Limits").

One cgroup per learner bounds the sum of all their processes: memory (RAM, and the /dev/shm and
tmpfs pages they write, which the kernel charges to the writer's cgroup) and tasks (pids: processes
and threads). cgroup v2 where it is mounted with the memory and pids controllers and root may
enable them; else the v1 hierarchies of those controllers; else, for a controller neither offers,
the fallback: rlimits, per process for memory (RLIMIT_AS; RLIMIT_FSIZE bounds each file, also in
/dev/shm, not their sum) and per user for tasks (RLIMIT_NPROC). A process that joined its group
cannot leave it: the group's files belong to root. RLIMIT_AS is set in every mode, so that one
oversized allocation fails as a MemoryError in that kernel rather than waking the OOM killer.

Standard library only. Run as root: by the hub when it spawns a server (`prepare`, then `join` in
the child before it becomes the learner) and by tools/hub.py when it stops the room (`remove`).
"""
from __future__ import annotations

import os
import resource
from dataclasses import dataclass, field
from pathlib import Path

from hub.settings import Limits

GROUP = "gradient-accumulation-lab"  # the room's folder in each cgroup hierarchy
MOUNTINFO = Path("/proc/self/mountinfo")
NO_CGROUPS = "LAB_HUB_CGROUPS"  # =off in the hub's environment: rlimits only (to try the fallback)


def _mounts() -> list[tuple[str, Path, set[str]]]:
    """(filesystem type, mount point, super options) of every mount this process sees (none of the
    cgroup ones with $LAB_HUB_CGROUPS=off)."""
    found = []
    for line in MOUNTINFO.read_text().splitlines():
        left, _, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if len(fields) >= 5 and len(tail) >= 3:
            point = Path(fields[4].replace("\\040", " "))
            found.append((tail[0], point, set(tail[2].split(","))))
    if os.environ.get(NO_CGROUPS) == "off":
        found = [m for m in found if m[0] not in ("cgroup", "cgroup2")]
    return found


def _write(path: Path, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


@dataclass
class Enforcement:
    """How one learner's limits are enforced here: per resource, the mechanism's name, and the
    cgroup folders their processes join (empty in the rlimit fallback)."""

    memory: str = "rlimit"
    processes: str = "rlimit"
    groups: list[Path] = field(default_factory=list)

    def describe(self) -> dict[str, str]:
        return {"memory": self.memory, "processes": self.processes}


def _v2_base() -> tuple[Path | None, set[str]]:
    """The room's cgroup v2 folder and the controllers (of memory, pids) enabled for its children."""
    for kind, point, _ in _mounts():
        if kind != "cgroup2":
            continue
        try:
            wanted = {"memory", "pids"} & set((point / "cgroup.controllers").read_text().split())
            if not wanted:
                continue
            missing = wanted - set((point / "cgroup.subtree_control").read_text().split())
            if missing:  # refused (EBUSY) where processes sit in that group, as in most containers
                _write(point / "cgroup.subtree_control", " ".join(f"+{c}" for c in sorted(missing)))
            base = point / GROUP
            base.mkdir(exist_ok=True)
            _write(base / "cgroup.subtree_control", " ".join(f"+{c}" for c in sorted(wanted)))
            return base, wanted
        except OSError:
            continue
    return None, set()


def _v1_base(controller: str) -> Path | None:
    """The room's folder in the v1 hierarchy of `controller`, or None if there is none root may write."""
    for kind, point, options in _mounts():
        if kind == "cgroup" and controller in options:
            base = point / GROUP
            try:
                base.mkdir(exist_ok=True)
                return base
            except OSError:
                return None
    return None


def _set_v1_memory(group: Path, limit: int) -> None:
    """memory.limit_in_bytes, and memsw (memory + swap) to the same where swap is accounted: the
    kernel wants limit <= memsw at every moment, so the order depends on the direction."""
    pairs = [("memory.limit_in_bytes", limit)]
    if (group / "memory.memsw.limit_in_bytes").exists():
        pairs.append(("memory.memsw.limit_in_bytes", limit))
    try:
        for name, value in pairs:
            _write(group / name, str(value))
    except OSError:  # raising the limit: memsw first
        for name, value in reversed(pairs):
            _write(group / name, str(value))


def _set(group: Path, controller: str, limits: Limits, version: int) -> None:
    if controller == "pids":
        _write(group / "pids.max", str(limits.processes))
    elif version == 1:
        _set_v1_memory(group, limits.memory)
    else:
        _write(group / "memory.max", str(limits.memory))
        if (group / "memory.swap.max").exists():
            _write(group / "memory.swap.max", "0")  # no escape into swap


def prepare(name: str, limits: Limits) -> Enforcement:
    """Make (or update) learner `name`'s groups with `limits`; which mechanism holds each resource."""
    enforcement = Enforcement()
    v2, offered = _v2_base()
    for what, controller in (("memory", "memory"), ("processes", "pids")):
        base, version = (v2, 2) if controller in offered else (_v1_base(controller), 1)
        if base is None:
            continue  # the rlimit fallback (join sets it)
        group = base / name
        group.mkdir(exist_ok=True)
        _set(group, controller, limits, version)
        setattr(enforcement, what, f"cgroup v{version} ({group})")
        if group not in enforcement.groups:
            enforcement.groups.append(group)
    return enforcement


def joining(enforcement: Enforcement, limits: Limits) -> dict[str, list]:
    """What a process of learner `name` does as root before it becomes them: the files of their groups to
    write "0" into (this process; its children are born inside), and the rlimits to set, as [resource, value]."""
    rlimits = [[resource.RLIMIT_AS, limits.memory]]
    if enforcement.memory == "rlimit":
        rlimits.append([resource.RLIMIT_FSIZE, limits.memory])
    if enforcement.processes == "rlimit":
        rlimits.append([resource.RLIMIT_NPROC, limits.processes])
    return {"procs": [str(group / "cgroup.procs") for group in enforcement.groups], "rlimits": rlimits}


def join(enforcement: Enforcement, limits: Limits) -> None:
    """In the child, as root, before it becomes the learner: enter the groups, set the rlimits."""
    plan = joining(enforcement, limits)
    for procs in plan["procs"]:
        _write(Path(procs), "0")
    for which, value in plan["rlimits"]:
        resource.setrlimit(which, (value, value))


def groups_of(name: str) -> list[Path]:
    """Learner `name`'s cgroup folders that exist now, in any hierarchy."""
    found = []
    for kind, point, options in _mounts():
        if kind == "cgroup2" or (kind == "cgroup" and options & {"memory", "pids"}):
            group = point / GROUP / name
            if group.is_dir():
                found.append(group)
    return found


def tasks(group: Path) -> list[int]:
    try:
        return [int(pid) for pid in (group / "cgroup.procs").read_text().split()]
    except OSError:
        return []


def remove(name: str) -> list[str]:
    """Delete learner `name`'s groups (empty ones: stop kills first); the ones that could not be."""
    left = []
    for group in groups_of(name):
        try:
            group.rmdir()
        except OSError as error:
            left.append(f"{group} ({error.strerror})")
    return left


def remove_base() -> None:
    """Delete the room's folder in each hierarchy once no learner group is left in it."""
    for kind, point, options in _mounts():
        if kind == "cgroup2" or (kind == "cgroup" and options & {"memory", "pids"}):
            try:
                (point / GROUP).rmdir()
            except OSError:
                pass


def effective(pid: int) -> dict[str, str]:
    """What bounds process `pid` now, read back from the kernel: its cgroups' limits and its rlimits."""
    seen = {}
    try:
        lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    except OSError:
        return seen
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if GROUP in path:
            seen[controllers or "cgroup2"] = path
    limits = Path(f"/proc/{pid}/limits").read_text().splitlines()
    for line in limits:
        if line.startswith(("Max address space", "Max processes", "Max file size")):
            seen[line[:26].strip()] = line[26:47].strip()
    return seen


def mechanisms() -> dict[str, str]:
    """What would enforce each limit on this machine now: 'cgroup v2', 'cgroup v1' or 'rlimit ...'."""
    v2, offered = _v2_base()
    found = {}
    for what, controller, fallback in (("memory", "memory", "rlimit (RLIMIT_AS per process, RLIMIT_FSIZE per file)"),
                                       ("processes", "pids", "rlimit (RLIMIT_NPROC per user)")):
        if controller in offered:
            found[what] = f"cgroup v2 ({v2})"
        else:
            base = _v1_base(controller)
            found[what] = f"cgroup v1 ({base})" if base is not None else fallback
    return found
