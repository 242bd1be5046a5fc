"""widgets.core.views: tables render as Markdown tables, a diff marks what goes and what comes."""
import pytest

from widgets.core.views import Diff, Table


def test_a_table_is_markdown_with_numbers_aligned_right_and_pipes_escaped():
    table = Table(["mistake", "factor"], [["a | b", 4.0], ["`c`", 0.25]], right=frozenset({"factor"}))
    assert table._repr_markdown_() == "| mistake | factor |\n|---|---:|\n| a \\| b | 4 |\n| `c` | 0.25 |"
    assert repr(table) == table.markdown()
    with pytest.raises(ValueError, match="2 cells"):
        Table(["a", "b"], [[1]])


def test_a_diff_marks_what_goes_and_what_comes_and_escapes_the_code():
    shown = Diff(" keep\n-gone <x>\n+come", title="loop")
    html = shown._repr_html_()
    assert "line-through" in html and "#e6f5ee" in html and "&lt;x&gt;" in html and "<code>loop</code>" in html
    assert repr(shown) == "loop\n keep\n-gone <x>\n+come"
