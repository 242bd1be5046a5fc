"""The notebooks need no network: nothing is downloaded at run time (Binder, a train, a workshop).

Two checks here, a cheap one over every notebook and a real one over one notebook:
- no code cell contains a download (URLs, urllib/requests, pip/wget/curl, dataset fetchers), but for the
  install cell (tagged `lab-install`), which installs only on Colab or Kaggle and elsewhere prints one
  line (tests/test_install_cell.py holds its output to that line);
- the explorer notebook runs top to bottom inside `unshare -n` (loopback only, no other interface) with an
  audit hook that records any non-loopback connection or DNS lookup — even one a cell swallows.
The same run over every notebook is `python benchmarks/reliability.py offline`, recorded in
benchmarks/results/reliability.json (too slow for `make test`).
"""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
NETWORK = re.compile(
    r"https?://|urlopen|urllib\.request|\brequests\.|^\s*[!%]\s*(pip|conda|wget|curl)\b|download\s*=\s*True"
    r"|torch\.hub|load_dataset\(|fetch_openml|snapshot_download",
    re.M,
)


def code_lines(path: Path):
    for i, cell in enumerate(nbformat.read(path, as_version=4).cells):
        if cell.cell_type == "code" and "lab-install" not in cell.metadata.get("tags", []):
            for line in cell.source.splitlines():
                if not line.lstrip().startswith("#"):  # a reference in a comment downloads nothing
                    yield i, line


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_no_code_cell_downloads(path):
    found = [f"cell {i}: {line.strip()}" for i, line in code_lines(path) if NETWORK.search(line)]
    assert found == [], f"{path.name} reaches for the network"


def _explorer_notebook() -> Path | None:
    for path in NOTEBOOKS:
        for cell in nbformat.read(path, as_version=4).cells:
            for out in cell.get("outputs", []):
                if str(out.get("data", {}).get("text/plain", "")).startswith("AccumulationExplorer"):
                    return path
    return None


def test_the_explorer_notebook_runs_without_a_network():
    path = _explorer_notebook()
    if path is None:
        pytest.skip("no committed notebook shows the accumulation explorer yet")
    run = subprocess.run(
        [sys.executable, "benchmarks/reliability.py", "offline", str(path)],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    report = json.loads(run.stdout[run.stdout.index("{"):])
    result = report["notebooks"][path.relative_to(ROOT).as_posix()]
    assert result["network_attempts"] == [], result
    assert run.returncode == 0, result.get("error", run.stderr[-2000:])
    print(report["mode"])
