"""The build of the lab's package (its metadata is in pyproject.toml): one addition to setuptools' own.

A wheel built from the checkout carries a copy of benchmarks/results.json (the notebooks' measured run
times and memory peaks) as widgets/core/benchmark_results.json, so that a lab installed without the
checkout (the notebooks' install cell on Colab or Kaggle, pip from the repository) still shows them on
start-here's map and sizes the doctor's memory check. An editable install (`make lab`) reads the
checkout's own file instead (widgets.core.shared.benchmark_results_path).
"""
import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

RESULTS = Path(__file__).resolve().parent / "benchmarks" / "results.json"
PACKAGED = Path("widgets", "core", "benchmark_results.json")


class BuildWithResults(build_py):
    def run(self):
        super().run()
        if not self.editable_mode and RESULTS.exists():
            target = Path(self.build_lib, PACKAGED)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(RESULTS, target)


setup(cmdclass={"build_py": BuildWithResults})
