"""The memory, time and plan drawings."""
import pytest
from matplotlib.figure import Figure

from widgets.lessons.researcher_4.draw import draw_memory_terms, draw_plan, draw_time_per_update
from widgets.research.memory import MemoryTerms

ROWS = [MemoryTerms(b, 100, 100, 200, 50 * b, 60 * b + 10) for b in (1, 2, 4)]


def test_memory_bars_stack_and_only_activations_grow():
    bars = draw_memory_terms(ROWS, Figure().subplots(), scale=1.0)
    assert [r.get_height() for r in bars["activations"]] == [50, 100, 200]
    assert [r.get_height() for r in bars["parameters"]] == [100, 100, 100]
    assert bars["activations"][0].get_y() == 400  # stacked on the three fixed terms


def test_time_and_plan():
    ax1, ax2 = Figure().subplots(1, 2)
    drawn = draw_time_per_update([(1, 10.0), (2, 8.0)], {"fp32": [(1, 400.0), (64, 30.0)]}, ax1, ax2, "cpu", "gpu")
    assert ax2.get_title() == "gpu" and set(drawn) == {"cpu", "fp32"}
    plan = draw_plan([1, 2], [5.0, 12.0], [True, False], 10.0, Figure().subplots())
    assert plan["bars"][1].get_hatch() == "//"


def test_bad_input():
    with pytest.raises(TypeError, match="rows"):
        draw_memory_terms([], Figure().subplots())
    with pytest.raises(TypeError, match="ax"):
        draw_plan([1], [1.0], [True], 1.0, None)
