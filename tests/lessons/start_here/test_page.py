"""start-here as a beginner meets it (issue 36): the button the prose names is the widget's own, the advice on how
to run is the lab's one sentence, and the run times and the configuration check wait at the end of the page."""
from pathlib import Path

import nbformat

from widgets.lessons.start_here import make_bricks_widget

PAGE = Path(__file__).resolve().parents[3] / "notebooks" / "00_start_here.ipynb"
RUN_ADVICE = "Run the cells** in order with Shift + Enter, or all at once with Run All: each answer waits for"


def _cells():
    return nbformat.read(PAGE, as_version=4).cells


def _markdown() -> str:
    return "\n".join(cell.source for cell in _cells() if cell.cell_type == "markdown")


def test_the_prose_names_the_bricks_own_play_button_not_the_toolbars():
    bricks = make_bricks_widget()
    try:
        assert f"Press **{bricks.play.description}**" in _markdown()
    finally:
        bricks.close()
    assert "▶" not in _markdown()  # the toolbar's run button looks the same


def test_the_page_gives_the_labs_one_advice_on_how_to_run():
    text = _markdown()
    assert RUN_ADVICE in text and "Run → Run All Cells" not in text  # no second version of it


def test_run_times_and_the_configuration_check_come_after_the_doctor():
    sources = [cell.source for cell in _cells() if cell.cell_type == "code"]
    where = {what: next(i for i, s in enumerate(sources) if what in s)
             for what in ("make_bricks_widget(", "widgets.doctor()", "catalog_table()", "AccumulationConfig(")}
    assert where["make_bricks_widget("] < where["widgets.doctor()"] < where["catalog_table()"]
    assert where["widgets.doctor()"] < where["AccumulationConfig("]
