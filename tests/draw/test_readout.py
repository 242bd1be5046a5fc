"""`verdict_list_html`: one list item per sentence, each named verdict coloured and marked, the
text escaped, and a verdict not named left plain."""
from widgets.draw.style import verdict_list_html


def test_each_named_verdict_is_marked_and_the_rest_is_escaped():
    html = verdict_list_html(["a < b: gradients allclose: True", "learning rates match: False", "allclose: True"],
                             ("gradients allclose", "learning rates match"))
    assert html.count("<li>") == 3 and html.startswith("<ul") and html.endswith("</ul>")
    assert "a &lt; b" in html
    assert "gradients allclose: True ✓</b>" in html and "learning rates match: False ✗</b>" in html
    assert "<li>allclose: True</li>" in html  # not one of the verdicts named: plain text


def test_no_lines_is_an_empty_list():
    assert verdict_list_html([], ("allclose",)) == "<ul style='margin:0'></ul>"
