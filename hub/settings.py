"""The room's settings, checked as text before anything runs as root (`make hub`, `tools/hub.py`).

    python3 hub/settings.py      # what make runs first: checks every $LAB_MAKE_<VARIABLE>

make hands a root recipe each value it was given (LEARNERS, IP, PORT, N, LIMITS, the paths) through
the environment, as typed, never pasted into a shell line; this script refuses any value that is not
what its variable allows, naming the variable, before npm, apt-get, pip or the hub start. Standard
library only: it runs before the room's environment exists. `tools/hub.py` checks the same way.
"""
from __future__ import annotations

import ipaddress
import os
import re
import stat
import sys
from dataclasses import dataclass, replace
from pathlib import Path

NAME = re.compile(r"^[a-z][a-z0-9]{1,15}$")  # a system user name that needs no escaping anywhere
PATH = re.compile(r"^[A-Za-z0-9_./+-]+$")  # a path that needs no quoting in any shell or make line
TEST_COPY_MARK = ".gradient-accumulation-lab-hub-test"  # in HUB_TEST_COPY: the folder make hub-test may replace


def check_name(name: str, what: str = "learner name") -> str:
    if not isinstance(name, str) or not NAME.match(name):
        raise ValueError(f"{what} {name!r} must be 2 to 16 lowercase letters or digits, starting with a letter")
    return name


def check_learners(text: str) -> list[str]:
    """'ada,ben,cy' -> ['ada', 'ben', 'cy'] (spaces around names allowed); [] for ''."""
    names = [check_name(n.strip()) for n in text.split(",") if n.strip()]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ValueError(f"learner names must differ; given twice: {', '.join(twice)}")
    return names


def check_ip(text: str) -> str:
    """An IPv4 address in four dotted numbers ('127.1' and '1' are refused: too easy to misread)."""
    try:
        return str(ipaddress.IPv4Address(text))
    except ValueError:
        raise ValueError(f"IP {text!r} must be an IPv4 address of this machine, such as 127.0.0.1 or 192.168.1.10") from None


def check_count(text: str, what: str, low: int, high: int) -> int:
    if not isinstance(text, str) or not re.fullmatch(r"[0-9]{1,9}", text) or not low <= int(text) <= high:
        raise ValueError(f"{what} {text!r} must be a whole number in {low}..{high}")
    return int(text)


def parse_bytes(text: str) -> int:
    """'3G' -> 3 * 2**30 (the units of JupyterHub's mem_limit: K, M, G, T)."""
    match = re.fullmatch(r"(\d{1,6})([KMGT]?)", str(text).strip().upper())
    if not match:
        raise ValueError(f"memory {text!r} must be a number of bytes with K, M, G or T, e.g. '3G'")
    return int(match[1]) * 1024 ** " KMGT".index(match[2] or " ")


def check_path(text: str, what: str, absolute: bool = True) -> str:
    if not isinstance(text, str) or not PATH.match(text) or "/../" in f"/{text}/" or (absolute and not text.startswith("/")):
        raise ValueError(f"{what} {text!r} must be {'an absolute' if absolute else 'a'} path of letters, digits and "
                         "/ . _ + - only (no spaces, quotes or ..)")
    return text


def check_test_copy(text: str) -> str:
    """HUB_TEST_COPY: make hub-test deletes and refills it, so it must be new or one it made before."""
    path = Path(check_path(text, "HUB_TEST_COPY"))
    if len(path.parts) < 3:
        raise ValueError(f"HUB_TEST_COPY {text!r} must be a folder of its own, such as /tmp/gradient-accumulation-lab-hub-test")
    if path.is_symlink() or (path.exists() and (path.lstat().st_uid != os.geteuid() or not (path / TEST_COPY_MARK).is_file())):
        raise ValueError(f"HUB_TEST_COPY {text!r} exists and is not a copy make hub-test made (a link, another "
                         f"user's, or without {TEST_COPY_MARK}): it would be deleted; name a new folder")
    parent = path.parent
    if not parent.is_dir() or not parent.stat().st_mode & stat.S_IXOTH:
        raise ValueError(f"HUB_TEST_COPY {text!r}: its folder {parent} must exist and be open to other users (as /tmp is)")
    return text


def check_choice(text: str, what: str, allowed: tuple[str, ...]) -> str:
    if text not in allowed:
        raise ValueError(f"{what} {text!r} must be one of {', '.join(repr(a) for a in allowed)}")
    return text


# --- the per-learner limits -------------------------------------------------------------------------

@dataclass(frozen=True)
class Limits:
    """What one learner may hold, all their processes together (instructor/hub.md, "Limits").

    memory: bytes of RAM, /dev/shm and tmpfs included; processes: tasks (threads count);
    kernels: kernels their server runs at once."""

    memory: int = 3 * 2**30
    processes: int = 512
    kernels: int = 4

    def text(self) -> str:
        gib = self.memory / 2**30
        memory = f"{gib:g}G" if gib == int(gib) else f"{self.memory // 2**20}M"
        return f"memory={memory},processes={self.processes},kernels={self.kernels}"


LIMIT_RANGES = {"memory": (256 * 2**20, 2**44), "processes": (64, 100_000), "kernels": (1, 64)}


def parse_limits(text: str, base: Limits | None = None) -> Limits:
    """'memory=4G,kernels=3' -> `base` (default Limits()) with those changed; '' -> `base`."""
    limits = base or Limits()
    for part in (p.strip() for p in text.split(",") if p.strip()):
        key, _, value = part.partition("=")
        if key not in LIMIT_RANGES or not value:
            raise ValueError(f"LIMITS part {part!r} must be memory=<size>, processes=<n> or kernels=<n>, "
                             "e.g. memory=3G,processes=512,kernels=4")
        low, high = LIMIT_RANGES[key]
        number = parse_bytes(value) if key == "memory" else check_count(value, f"LIMITS {key}", low, high)
        if not low <= number <= high:  # memory (the counts are checked in range above)
            raise ValueError(f"LIMITS memory {value!r} must be between 256M and 16T")
        limits = replace(limits, **{key: number})
    return limits


# --- what make hands over ---------------------------------------------------------------------------

MAKE_CHECKS = {  # variable -> check of its text ('' is allowed where the variable may be left empty)
    "LEARNERS": check_learners,
    "IP": check_ip,
    "PORT": lambda t: check_count(t, "PORT", 1, 65535),
    "N": lambda t: check_count(t, "N (learners of the simulated room)", 1, 40),
    "LIMITS": parse_limits,
    "HUB_VENV": lambda t: check_path(t, "HUB_VENV"),
    "HUB_PYTHON": lambda t: check_path(t, "HUB_PYTHON"),
    "HUB_STATE": lambda t: check_path(t, "HUB_STATE"),
    "HUB_TEST_COPY": check_test_copy,
    "WHEELS": lambda t: t and check_path(t, "WHEELS", absolute=False),
    "TORCH": lambda t: check_choice(t, "TORCH", ("", "cpu")),
}


def check_make(env: dict[str, str]) -> list[str]:
    """Every problem with the LAB_MAKE_<VARIABLE> values in `env`, one line each ([] if none)."""
    problems = []
    for name, check in MAKE_CHECKS.items():
        value = env.get(f"LAB_MAKE_{name}")
        if value is None:
            continue
        try:
            check(value)
        except ValueError as error:
            problems.append(f"{name}={value!r}: {error}")
    return problems


def main() -> int:
    problems = check_make(dict(os.environ))
    if problems:
        print("make: a value given to make is not one the room accepts; nothing was run.", file=sys.stderr)
        for line in problems:
            print(f"  {line}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
