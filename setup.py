"""The build of the lab's package (its metadata is in pyproject.toml): one addition to setuptools' own.

A wheel built from the checkout carries a copy of benchmarks/results.json (the notebooks' measured run
times and memory peaks) as widgets/core/benchmark_results.json, and of the measurements a notebook reads
(benchmarks/results/planner_peak.json, researcher_4) under widgets/core/results/, so that a lab installed without the
checkout (the notebooks' install cell on Colab or Kaggle, pip from the repository) still shows them on
start-here's map and sizes the doctor's memory check. An editable install (`make lab`) reads the
checkout's own file instead (widgets.core.shared.benchmark_results_path).
"""
import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
# checkout file -> where the wheel carries it (widgets.core.shared: benchmark_results_path, results_path)
PACKAGED = {HERE / "benchmarks" / "results.json": Path("widgets", "core", "benchmark_results.json"),
            HERE / "benchmarks" / "results" / "planner_peak.json": Path("widgets", "core", "results", "planner_peak.json")}


class BuildWithResults(build_py):
    def run(self):
        super().run()
        for source, packaged in PACKAGED.items():
            if not self.editable_mode and source.exists():
                target = Path(self.build_lib, packaged)
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(source, target)


setup(cmdclass={"build_py": BuildWithResults})
