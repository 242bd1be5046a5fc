"""Run as the learner, in their home, before their first server starts: copy the lab's notebooks.

    python first_spawn.py <checkout>/notebooks gradient-accumulation-lab

Does nothing if the folder is already there (their work is never overwritten). Where the room has
a network, nbgitpuller does the same from the repository instead (instructor/hub.md).
"""
import shutil
import sys
from pathlib import Path

source, target = Path(sys.argv[1]), Path(sys.argv[2])
if not target.exists() and not target.is_symlink():
    shutil.copytree(source, target, ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__"))
