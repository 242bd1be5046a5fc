"""The ceilings: read from the environment, refused with the estimate and the limit, torch-free."""
import subprocess
import sys

import pytest

from widgets.core import budget


def test_defaults_and_the_environment(monkeypatch):
    monkeypatch.delenv(budget.MEMORY_ENV, raising=False)
    monkeypatch.delenv(budget.TIME_ENV, raising=False)
    assert budget.memory_limit_bytes() == 1024 * 2**20 and budget.time_limit_s() == 300
    monkeypatch.setenv(budget.MEMORY_ENV, "2048")
    monkeypatch.setenv(budget.TIME_ENV, "10")
    assert budget.memory_limit_bytes() == 2 * 2**30 and budget.time_limit_s() == 10


@pytest.mark.parametrize("text", ["0", "-5", "nan", "inf", "lots"])
def test_a_bad_limit_names_the_variable(monkeypatch, text):
    monkeypatch.setenv(budget.MEMORY_ENV, text)
    with pytest.raises(ValueError, match=f"LAB_MEMORY_LIMIT_MB must be a positive number, got '{text}'"):
        budget.memory_limit_bytes()


def test_refusals_carry_the_estimate_and_the_limit(monkeypatch):
    monkeypatch.delenv(budget.MEMORY_ENV, raising=False)
    monkeypatch.delenv(budget.TIME_ENV, raising=False)
    assert budget.check_memory("x", 2**30) == 2**30  # at the ceiling: allowed
    with pytest.raises(budget.BudgetError, match=r"big thing would need about 3\.0 GB, over this lab's limit of 1\.0 GB"):
        budget.check_memory("big thing", 3 * 2**30)
    with pytest.raises(budget.BudgetError, match=r"long thing would run about 400 s, over this lab's limit of 300 s"):
        budget.check_time("long thing", 400)


def test_torch_free():
    probe = "import sys, widgets.core.budget; print('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.strip() == "False"
