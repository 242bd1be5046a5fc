"""Time per update: the shape of the result and the fit (no speed is asserted)."""
import pytest

from widgets.research.memory import TinyGPT
from widgets.lessons.researcher_4.timing import TimingRow, fit_micro_step_time, time_per_update


def test_rows_cover_each_b():
    rows = time_per_update(8, (2, 8), repeats=1, model=TinyGPT(layers=1, hidden=16, heads=2, seq_len=8, vocab=16))
    assert [(r.micro_batch_size, r.accumulation_steps) for r in rows] == [(2, 4), (8, 1)]
    assert all(r.seconds_per_update > 0 for r in rows)


def test_fit_recovers_overhead_and_per_example_cost():
    rows = [TimingRow(b, 64 // b, (64 // b) * (0.002 + 0.001 * b)) for b in (1, 2, 4, 8, 64)]
    overhead, per_example = fit_micro_step_time(rows)
    assert overhead == pytest.approx(0.002) and per_example == pytest.approx(0.001)


def test_bad_input():
    with pytest.raises(ValueError, match="micro_batch_sizes"):
        time_per_update(8, (3,))
    with pytest.raises(ValueError, match="effective_batch_size"):
        time_per_update(0)
    with pytest.raises(ValueError, match="rows"):
        fit_micro_step_time([])


def test_a_run_too_long_for_the_ceiling_is_refused_before_it_starts(monkeypatch):
    from widgets.core.config import BudgetError
    from widgets.research.memory import TinyGPT
    from widgets.lessons.researcher_4.timing import time_per_update

    model = TinyGPT(layers=2, hidden=64, seq_len=32, vocab=128, dropout=0.0)
    monkeypatch.setenv("LAB_TIME_LIMIT_S", "0.001")
    with pytest.raises(BudgetError, match="time_per_update"):
        time_per_update(32, (1, 32), repeats=1, model=model)
