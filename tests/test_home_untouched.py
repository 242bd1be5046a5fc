"""nbval on one notebook, started the way a contributor would (`pytest notebooks/x.ipynb`, so
tests/conftest.py is not loaded), writes nothing into the learner's home folder, and the root
conftest.py removes its temporary folder afterwards. Without that conftest.py the same run writes
~/.ipython, ~/.cache/matplotlib and ~/.config/matplotlib (checked with --noconftest)."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = "notebooks/00_start_here.ipynb"  # small, and it imports the lab and matplotlib
REDIRECTED = ("LAB_PROGRESS_FILE", "JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR", "JUPYTER_RUNTIME_DIR",
              "IPYTHONDIR", "MPLCONFIGDIR")


@pytest.mark.slow
def test_nbval_on_one_notebook_leaves_home_untouched(tmp_path):
    home, temp = tmp_path / "home", tmp_path / "tmp"
    home.mkdir()
    temp.mkdir()
    # This run's own redirects are dropped: only the root conftest.py may keep the child off HOME.
    env = {k: v for k, v in os.environ.items() if k not in REDIRECTED} | {"HOME": str(home), "TMPDIR": str(temp)}
    run = subprocess.run([sys.executable, "-m", "pytest", "--nbval-current-env", NOTEBOOK, "-q",
                          "-p", "no:cacheprovider"], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]  # nbval ran: the kernel started
    assert " passed" in run.stdout, run.stdout[-3000:]
    assert not (home / ".gradient-accumulation-lab").exists()
    written = sorted(str(p.relative_to(home)) for p in home.rglob("*"))
    assert written == [], f"the test run wrote into HOME: {written}"
    left = sorted(p.name for p in temp.iterdir())
    assert left == [], f"the session's temporary folder was not removed: {left}"
