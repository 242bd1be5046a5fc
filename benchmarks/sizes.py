"""Every public builder that takes a size, called with one enormous size: does it allocate past the budget?

    python benchmarks/sizes.py            # a table; exit 1 if any builder went over
    python benchmarks/sizes.py --json     # the records (tests/core/test_sizes_checked.py reads them)

A builder is a public function or class of `widgets` with a size-like int parameter that can be called from
sizes alone. Each size in turn gets 2**24 and 2**40 (the others at the smallest that works), in a forked child
under LAB_MEMORY_LIMIT_MB=256 with RLIMIT_AS a little above; it passes if it returned or refused without a
failed allocation, a kill or 30 s, and its peak resident memory grew by at most the budget.
"""
from __future__ import annotations

import argparse
import importlib
import inspect
import json
import os
import pkgutil
import re
import resource
import signal
import sys
import time
import typing

# Builders whose source a notebook shows verbatim (tests/research/test_cells_show_the_algorithm.py) and
# that do not check their sizes yet: listed, not probed, until the lesson's cell carries the check. None now.
SHOWN_UNCHECKED: dict[str, str] = {}
BUDGET_MB = 256
LARGE, ENORMOUS = 2**24, 2**40
BASELINES = (1, 2, 4, 8, 16)
CALL_TIMEOUT_S = 30
SIZE_NAME = re.compile(r"(^|_)(size|steps|batches|examples|sequences|layers|hidden|width|depth|devices|workers|"
                       r"completions|tokens|len|vocab|updates|windows|dim|experts|domains|features|pairs|runs|seeds)$|^num_")


def _size_parameters(obj) -> list[str] | None:
    """Its size-like int parameters, if it can be called from sizes alone; else None."""
    try:
        signature = inspect.signature(obj)
        hints = typing.get_type_hints(obj.__init__ if inspect.isclass(obj) else obj)
    except (TypeError, ValueError, NameError):
        return None
    sizes = [name for name in signature.parameters if SIZE_NAME.search(name) and hints.get(name) is int]
    required = [p for p in signature.parameters.values() if p.default is p.empty and p.name not in sizes
                and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    return sizes if sizes and not required else None


def builders() -> dict[str, list[str]]:
    """'module.name' -> its size parameters, for every builder in `widgets` (see the docstring)."""
    import widgets

    found = {}
    for info in pkgutil.walk_packages(widgets.__path__, "widgets."):
        module = importlib.import_module(info.name)
        for name, obj in vars(module).items():
            if name.startswith("_") or getattr(obj, "__module__", None) != module.__name__:
                continue
            if inspect.isfunction(obj) or inspect.isclass(obj):
                sizes = _size_parameters(obj)
                if sizes:
                    found[f"{module.__name__}.{name}"] = sizes
    return found


def _resolve(qualified: str):
    module, name = qualified.rsplit(".", 1)
    return getattr(importlib.import_module(module), name)


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _vm_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")


def _call(qualified: str, arguments: dict, out: int) -> None:
    """In the child: call it once under the ceiling and the alarm; write what happened to `out`."""
    import torch
    torch.set_num_threads(1)
    ceiling = _vm_bytes() + (BUDGET_MB + 768) * 2**20  # a runaway dies here, not in the machine's memory
    resource.setrlimit(resource.RLIMIT_AS, (ceiling, ceiling))
    signal.alarm(CALL_TIMEOUT_S)
    start_mb = _rss_mb()
    t0 = time.perf_counter()
    try:
        _resolve(qualified)(**arguments)
        outcome, why = "returned", ""
    except MemoryError:
        outcome, why = "allocated", "MemoryError: it tried to allocate past the ceiling"
    except BaseException as error:  # noqa: BLE001 -- a refusal is what we hope for; recorded with its reason
        text = str(error).splitlines()[0][:160] if str(error) else ""
        outcome = "allocated" if "can't allocate memory" in text else "refused"
        why = f"{type(error).__name__}: {text}"
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # kB on Linux
    record = {"outcome": outcome, "why": why, "grew_mb": round(max(0.0, peak_mb - start_mb), 1),
              "seconds": round(time.perf_counter() - t0, 2)}
    os.write(out, json.dumps(record).encode())


def call(qualified: str, arguments: dict) -> dict:
    """`qualified(**arguments)` in a forked child: its outcome, why, how much it grew and how long it took."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        try:
            _call(qualified, arguments, write)
        finally:
            os._exit(0)
    os.close(write)
    chunks = []
    while chunk := os.read(read, 65536):
        chunks.append(chunk)
    os.close(read)
    _, status = os.waitpid(pid, 0)
    if chunks:
        return json.loads(b"".join(chunks))
    signum = os.WTERMSIG(status) if os.WIFSIGNALED(status) else None
    why = f"no answer within {CALL_TIMEOUT_S} s" if signum == signal.SIGALRM else f"died (signal {signum}, status {status})"
    return {"outcome": "killed", "why": why, "grew_mb": None, "seconds": None}


def baseline(qualified: str, sizes: list[str]) -> dict | None:
    """Small values for its required sizes with which it returns (None: none of BASELINES works)."""
    signature = inspect.signature(_resolve(qualified))
    required = [name for name in sizes if signature.parameters[name].default is inspect.Parameter.empty]
    if not required:
        return {}
    for value in BASELINES:
        arguments = dict.fromkeys(required, value)
        if call(qualified, arguments)["outcome"] == "returned":
            return arguments
    return None


def probe(qualified: str, sizes: list[str]) -> list[dict]:
    """Each size parameter at LARGE and at ENORMOUS, the others at the baseline: one record per call."""
    base = baseline(qualified, sizes)
    if base is None:
        return [{"builder": qualified, "parameter": None, "size": None, "outcome": "no baseline", "passed": False,
                 "why": f"no call with its required sizes all in {BASELINES} returned: give it defaults", "grew_mb": None}]
    records = []
    for parameter in sizes:
        for size in (LARGE, ENORMOUS):
            record = {"builder": qualified, "parameter": parameter, "size": size,
                      **call(qualified, {**base, parameter: size})}
            record["passed"] = record["outcome"] in ("refused", "returned") and record["grew_mb"] <= BUDGET_MB
            records.append(record)
    return records


def run(names: list[str] | None = None) -> dict:
    os.environ["LAB_MEMORY_LIMIT_MB"] = str(BUDGET_MB)
    import torch  # noqa: F401 -- imported once here, before the forks

    found = builders()
    chosen = [name for name in (names or sorted(found)) if name not in SHOWN_UNCHECKED]
    records = [record for name in chosen for record in probe(name, found[name])]
    return {"passed": all(r["passed"] for r in records), "budget_mb": BUDGET_MB, "sizes": [LARGE, ENORMOUS],
            "not_probed": {name: why for name, why in SHOWN_UNCHECKED.items() if name in found},
            "builders": len({r["builder"] for r in records}), "calls": len(records),
            "over_budget": [r for r in records if not r["passed"]], "records": records}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the records as JSON")
    parser.add_argument("--list", action="store_true", help="print the builders found and their size parameters")
    parser.add_argument("builders", nargs="*", help="only these (module.name); default: every builder")
    args = parser.parse_args(argv)
    os.environ.setdefault("MALLOC_ARENA_MAX", "2")  # glibc's arenas reserve address space, not memory
    if args.list:
        print(json.dumps(builders(), indent=1))
        return 0
    result = run(args.builders)
    if args.json:
        print(json.dumps(result))
    else:
        for r in result["records"]:
            size = f"2**{r['size'].bit_length() - 1}" if r["size"] else "?"
            print(f"{'ok  ' if r['passed'] else 'OVER'} {r['builder']}({r['parameter']}={size}): {r['outcome']}, "
                  f"grew {r['grew_mb']} MB in {r.get('seconds')} s {r['why']}")
        print(f"{result['calls']} calls to {result['builders']} builders, {len(result['over_budget'])} over "
              f"the {BUDGET_MB} MB budget; not probed: {result['not_probed'] or 'none'}")
    return 0 if result["passed"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
