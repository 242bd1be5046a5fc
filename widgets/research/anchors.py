"""Reference measurements from an NVIDIA H200, shipped with the package (data/README.md); whatever shows them says so."""
from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

ANCHORS_PATH = Path(__file__).parent / "data" / "gpu_h200.json"
SOURCE = "measured on an NVIDIA H200 (torch 2.11, CUDA 13), not by this notebook"


@lru_cache(maxsize=1)
def _anchors() -> dict:
    return json.loads(ANCHORS_PATH.read_text())


def anchor_block(name: str) -> dict:
    """One block of the H200 file ('time_per_update' or 'precision'): its `setup` text and `rows`."""
    blocks = {k: v for k, v in _anchors().items() if isinstance(v, dict)}
    if name not in blocks:
        raise ValueError(f"name must be one of {sorted(blocks)}, got {name!r}")
    return blocks[name]


def anchor_rows(name: str) -> list[dict]:
    """The measured rows of one block, as a list of dicts (a copy: callers may change it)."""
    return [dict(row) for row in anchor_block(name)["rows"]]
