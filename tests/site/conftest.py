"""`built_site`: the book site (site/build.py) built once per test run, shared by the xdist workers."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from filelock import FileLock

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def built_site(tmp_path_factory, worker_id) -> Path:
    """The html folder of the site, built into this run's temporary folder: the first worker builds it, the others
    wait on the lock and read it (pytest-xdist's recipe for a session fixture run once)."""
    base = tmp_path_factory.getbasetemp()
    out = (base if worker_id == "master" else base.parent) / "site"
    failed = out / "failed.txt"
    with FileLock(str(out) + ".lock"):
        if not (out / "html" / "index.html").exists() and not failed.exists():
            out.mkdir(exist_ok=True)
            build = subprocess.run([sys.executable, str(ROOT / "site" / "build.py"), "--out", str(out)], cwd=ROOT,
                                   capture_output=True, text=True, timeout=600)
            if build.returncode:
                failed.write_text(f"{build.stdout[-4000:]}\n{build.stderr[-8000:]}")
    if failed.exists():
        pytest.fail(f"site/build.py failed:\n{failed.read_text()}")
    return out / "html"
