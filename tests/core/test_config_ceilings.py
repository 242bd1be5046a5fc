"""The ceilings: read from the environment, refused with the estimate and the limit, torch-free."""
import subprocess
import sys

import pytest

from widgets.core import config


def test_defaults_and_the_environment(monkeypatch):
    monkeypatch.delenv(config.MEMORY_ENV, raising=False)
    monkeypatch.delenv(config.TIME_ENV, raising=False)
    assert config.check_memory("x", 2**30) and config.check_time("x", 300)  # the defaults: 1024 MB, 300 s
    with pytest.raises(config.BudgetError, match="1.0 GB"):
        config.check_memory("x", 2**30 + 1)
    monkeypatch.setenv(config.MEMORY_ENV, "2048")
    monkeypatch.setenv(config.TIME_ENV, "10")
    assert config.check_memory("x", 2 * 2**30) and config.check_time("x", 10)
    with pytest.raises(config.BudgetError, match="limit of 10 s"):
        config.check_time("x", 11)


@pytest.mark.parametrize("text", ["0", "-5", "nan", "inf", "lots"])
def test_a_bad_limit_names_the_variable(monkeypatch, text):
    monkeypatch.setenv(config.MEMORY_ENV, text)
    with pytest.raises(ValueError, match=f"LAB_MEMORY_LIMIT_MB must be a positive number, got '{text}'"):
        config.check_memory("x", 1)


def test_refusals_carry_the_estimate_and_the_limit(monkeypatch):
    monkeypatch.delenv(config.MEMORY_ENV, raising=False)
    monkeypatch.delenv(config.TIME_ENV, raising=False)
    assert config.check_memory("x", 2**30) == 2**30  # at the ceiling: allowed
    with pytest.raises(config.BudgetError, match=r"big thing would need about 3\.0 GB, over this lab's limit of 1\.0 GB"):
        config.check_memory("big thing", 3 * 2**30)
    with pytest.raises(config.BudgetError, match=r"long thing would run about 400 s, over this lab's limit of 300 s"):
        config.check_time("long thing", 400)


def test_torch_free():
    probe = "import sys, widgets.core.config; print('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.strip() == "False"
