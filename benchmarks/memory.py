"""How much memory a notebook takes, its kernel and the worker processes it starts together.

    python benchmarks/memory.py notebooks/researcher_5_many_machines.ipynb
    python benchmarks/memory.py notebooks/researcher_5_many_machines.ipynb --limit-mb 800

Summed RSS counts pages the workers share once per process; PSS shares them out; `peak_resident_mb`
counts each physical page once (/proc/PID/pagemap, root only). `--limit-mb` runs it in a memory cgroup with
no swap and the page cache dropped first (root), as Binder and Kubernetes limit a pod.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import psutil

ROOT = Path(__file__).resolve().parents[1]
PAGE = os.sysconf("SC_PAGE_SIZE")
_PRESENT = np.uint64(1 << 63)
_FRAME = np.uint64((1 << 55) - 1)


def resident_frames(pid: int) -> np.ndarray | None:
    """The physical page frame numbers of every resident page of process `pid` (unique, sorted),
    or None when the kernel hides frame numbers from this user (they read as 0 unless root)."""
    frames = []
    with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/pagemap", "rb") as pagemap:
        for line in maps:
            fields = line.split()
            if fields[-1] == "[vsyscall]":  # above the user address space: pagemap cannot be read there
                continue
            low, high = (int(x, 16) for x in fields[0].split("-"))
            pagemap.seek(low // PAGE * 8)
            entries = np.frombuffer(pagemap.read((high - low) // PAGE * 8), dtype=np.uint64)
            frames.append(entries[(entries & _PRESENT) != 0] & _FRAME)
    found = np.unique(np.concatenate(frames)) if frames else np.zeros(0, np.uint64)
    if found.size and not found.any():
        return None
    return found


def tree_resident_bytes(pids: list[int]) -> int | None:
    """Bytes of physical memory resident in any of `pids`, each page counted once."""
    frames = []
    for pid in pids:
        try:
            found = resident_frames(pid)
        except (FileNotFoundError, ProcessLookupError, PermissionError):  # it ended while we read
            continue
        if found is None:
            return None
        frames.append(found)
    return int(np.unique(np.concatenate(frames)).size * PAGE) if frames else 0


class TreeMemory:
    """Polls this process's descendants (a kernel and any workers it starts) while in the `with`
    block and keeps the peak of each reading: summed RSS every `interval_s` (cheap), summed PSS and
    the tree's resident pages as often as reading them allows (a few times a second: each reads
    every mapping of every process). The polling takes CPU, so time a notebook in a separate run."""

    def __init__(self, interval_s: float = 0.02) -> None:
        self.peak_rss = self.peak_pss = 0
        self.peak_resident: int | None = 0
        self.interval_s = interval_s
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._poll_rss, daemon=True),
                         threading.Thread(target=self._poll_shared, daemon=True)]

    @staticmethod
    def _tree() -> list[psutil.Process]:
        return psutil.Process().children(recursive=True)

    def _poll_rss(self) -> None:
        while not self._stop.is_set():
            rss = 0
            for child in self._tree():
                try:
                    rss += child.memory_info().rss
                except psutil.Error:
                    pass
            self.peak_rss = max(self.peak_rss, rss)
            time.sleep(self.interval_s)

    def _poll_shared(self) -> None:
        while not self._stop.is_set():
            pss, pids = 0, []
            for child in self._tree():
                try:
                    pss += getattr(child.memory_full_info(), "pss", 0)
                    pids.append(child.pid)
                except psutil.Error:
                    pass
            self.peak_pss = max(self.peak_pss, pss)
            if self.peak_resident is not None:
                resident = tree_resident_bytes(pids)
                self.peak_resident = None if resident is None else max(self.peak_resident, resident)
            time.sleep(self.interval_s)

    def __enter__(self) -> "TreeMemory":
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join()

    def megabytes(self) -> dict:
        mb = lambda b: None if b is None else round(b / 2**20, 1)  # noqa: E731
        return {"peak_rss_mb": mb(self.peak_rss), "peak_pss_mb": mb(self.peak_pss),
                "peak_resident_mb": mb(self.peak_resident)}


def run_notebook(path: Path) -> float:
    """Execute a copy of the notebook in a fresh kernel (the file is not rewritten); the seconds it took."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}})
    start = time.perf_counter()
    client.execute()
    return time.perf_counter() - start


def measure_notebook(path: Path) -> dict:
    """Its run time, and in a second run its peak memory: the polling takes a core, which would
    slow the timed run."""
    seconds = run_notebook(path)
    with TreeMemory() as memory:
        run_notebook(path)
    return {"seconds": round(seconds, 1), **memory.megabytes()}


# --- a hard limit, as Binder sets one --------------------------------------------------------------

class NoCgroup(RuntimeError):
    """This machine or user cannot create a memory cgroup; the message says why."""


@dataclass
class Cgroup:
    """A fresh memory cgroup below this process's own, with a hard limit and no swap."""

    path: Path
    version: int

    @classmethod
    def create(cls, limit_mb: int) -> "Cgroup":
        lines = Path("/proc/self/cgroup").read_text().splitlines()
        v1 = [line.split(":", 2)[2] for line in lines if line.split(":", 2)[1] == "memory"]
        v2 = [line.split(":", 2)[2] for line in lines if line.startswith("0::")]
        mount_v2 = Path("/sys/fs/cgroup")
        if v1 and Path("/sys/fs/cgroup/memory").is_dir():
            parent, version = Path("/sys/fs/cgroup/memory") / v1[0].lstrip("/"), 1
        elif v2 and "memory" in (mount_v2 / "cgroup.controllers").read_text(errors="ignore").split():
            parent, version = mount_v2 / v2[0].lstrip("/"), 2
        else:
            raise NoCgroup("no memory cgroup controller is mounted here (neither cgroup v1 nor v2)")
        path = parent / f"gal-limit-{uuid.uuid4().hex[:8]}"
        try:
            path.mkdir()
        except OSError as error:
            raise NoCgroup(f"cannot create a memory cgroup under {parent}: {error.strerror} (it needs root)") from None
        group = cls(path, version)
        limit = str(limit_mb * 2**20)
        if version == 1:
            group._write("memory.limit_in_bytes", limit)
            if (path / "memory.memsw.limit_in_bytes").exists():
                group._write("memory.memsw.limit_in_bytes", limit)  # memory + swap: no escape into swap
        else:
            group._write("memory.max", limit)
            group._write("memory.swap.max", "0")
        return group

    def _write(self, name: str, value: str) -> None:
        (self.path / name).write_text(value)

    def _read(self, name: str) -> str:
        return (self.path / name).read_text()

    def join(self) -> None:
        """Move the calling process into the group (its children are born in it)."""
        self._write("cgroup.procs", str(os.getpid()))

    def peak_bytes(self) -> int:
        return int(self._read("memory.max_usage_in_bytes" if self.version == 1 else "memory.peak"))

    def oom_kills(self) -> int:
        text = self._read("memory.oom_control" if self.version == 1 else "memory.events")
        counts = dict(line.split() for line in text.splitlines() if line.strip())
        return int(counts.get("oom_kill", 0))

    def remove(self) -> None:
        for _ in range(50):  # rmdir fails while a process of the group is still exiting
            try:
                self.path.rmdir()
                return
            except OSError:
                time.sleep(0.1)


def drop_page_cache() -> bool:
    """Write back and drop the clean page cache, so that files read next are charged to the reader."""
    try:
        os.sync()
        Path("/proc/sys/vm/drop_caches").write_text("1")
        return True
    except OSError:
        return False


def run_under_limit(path: Path, limit_mb: int) -> dict:
    """Execute the notebook in a child process inside a fresh memory cgroup limited to `limit_mb`."""
    group = Cgroup.create(limit_mb)
    try:
        dropped = drop_page_cache()
        start = time.perf_counter()
        child = subprocess.run(
            [sys.executable, __file__, str(path), "--inside-limit"], preexec_fn=group.join,
            capture_output=True, text=True, cwd=ROOT)
        seconds = time.perf_counter() - start
        last_line = re.sub(r"\x1b\[[0-9;]*m", "", child.stderr).strip().splitlines()[-1:] if child.returncode else []
        return {"limit_mb": limit_mb, "finished": child.returncode == 0, "returncode": child.returncode,
                "seconds": round(seconds, 1),
                "cgroup_peak_mb": round(group.peak_bytes() / 2**20, 1), "oom_kills": group.oom_kills(),
                "page_cache_dropped_first": dropped, "cgroup_version": group.version,
                "error": last_line[0] if last_line else None}
    finally:
        group.remove()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("notebook", type=Path)
    parser.add_argument("--limit-mb", type=int, nargs="+", default=[],
                        help="also run it under a hard memory limit of this many MB (several: one run each)")
    parser.add_argument("--inside-limit", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help="write the result as JSON here")
    args = parser.parse_args()
    path = args.notebook.resolve()
    if not path.is_file():
        parser.error(f"notebook: no such file {args.notebook}")
    bad = [limit for limit in args.limit_mb if limit < 1]
    if bad:
        parser.error(f"--limit-mb must be a positive number of MB, got {bad[0]}")
    if args.inside_limit:  # the child of run_under_limit: just run it
        run_notebook(path)
        return
    result = {"notebook": str(path.relative_to(ROOT)), **measure_notebook(path),
              "measured_on": time.strftime("%Y-%m-%d"), "cpus": psutil.cpu_count(),
              "command": " ".join(["python benchmarks/memory.py", str(path.relative_to(ROOT)),
                                   *(["--limit-mb", *map(str, args.limit_mb)] if args.limit_mb else [])])}
    runs = []
    for limit in args.limit_mb:
        try:
            runs.append(run_under_limit(path, limit))
        except NoCgroup as error:
            runs.append({"limit_mb": limit, "finished": None, "error": str(error)})
    if runs:
        result["under_limit"] = runs
    print(json.dumps(result, indent=2))
    if args.out:
        args.out.write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
