"""Execute notebooks in place, top to bottom, so that they are committed with real outputs.

    python benchmarks/execute_notebooks.py                      # every notebook
    python benchmarks/execute_notebooks.py notebooks/x.ipynb    # just these

No widget state is saved: a `widgets` entry without `state` breaks GitHub's renderer, and each widget
leaves a static PNG for readers without a kernel.
"""
from __future__ import annotations

import os
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]


def all_notebooks() -> list[Path]:
    return sorted((ROOT / "notebooks").rglob("*.ipynb"))


# Tracebacks name files by absolute path; a committed notebook should not show this machine's.
MACHINE_PATHS = {
    sysconfig.get_paths()["purelib"]: "<site-packages>",
    str(ROOT): "<repository>",
    sys.prefix: "<python>",
}


def scrub_machine_paths(nb: nbformat.NotebookNode) -> None:
    """Replace absolute paths in error tracebacks (nbval does not compare tracebacks)."""
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                lines = output["traceback"]
                for path, placeholder in MACHINE_PATHS.items():
                    lines = [line.replace(path, placeholder) for line in lines]
                output["traceback"] = lines


def coalesce_streams(nb: nbformat.NotebookNode) -> None:
    """Join consecutive stdout (or stderr) chunks of a cell into one output. How a print's text is
    cut into chunks depends on when the kernel flushed, so without this a re-run whose text is the
    same still rewrites the file (nbval joins them too before comparing)."""
    for cell in nb.cells:
        merged = []
        for output in cell.get("outputs", []):
            previous = merged[-1] if merged else None
            if (output.get("output_type") == "stream" and previous is not None
                    and previous.get("output_type") == "stream" and previous["name"] == output["name"]):
                previous["text"] += output["text"]
            else:
                merged.append(output)
        if "outputs" in cell:
            cell["outputs"] = merged


def execute(path: Path) -> float:
    """Run one notebook in place with a fresh kernel; returns the seconds it took, kernel start included."""
    nb = nbformat.read(path, as_version=4)
    # The notebooks' checked exercises record progress: never into this machine's own progress file.
    os.environ.setdefault("LAB_PROGRESS_FILE", str(Path(tempfile.mkdtemp(prefix="lab-execute-")) / "progress.json"))
    for cell in nb.cells:  # when each cell ran is noise in a diff, and a merge conflict in every cell
        cell.metadata.pop("execution", None)
    client = NotebookClient(
        nb, timeout=600, kernel_name="python3", store_widget_state=False, record_timing=False,
        resources={"metadata": {"path": str(path.parent)}},
    )
    start = time.perf_counter()
    client.execute()
    seconds = time.perf_counter() - start
    nb.metadata.pop("widgets", None)
    scrub_machine_paths(nb)
    coalesce_streams(nb)
    nbformat.write(nb, path)
    return seconds


if __name__ == "__main__":
    paths = [Path(p).resolve() for p in sys.argv[1:]] or all_notebooks()
    for path in paths:
        print(f"{execute(path):6.1f} s  {path.relative_to(ROOT)}", flush=True)
