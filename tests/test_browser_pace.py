"""Each learner at their own pace, in JupyterLab in Chromium (issue 36, item 4): after Run All no prediction's
answer is on the page before its guess is committed, and a click alone commits a corrected guess; a worked answer
waits for the learner's own checked answer.

beginner_1 is run top to bottom; what each reveal cell holds is read from the committed notebook (its output's
folded text, widgets/controls/reveal.py), and none of it may be on the page. Then a guess is typed, corrected and
committed by a click without Enter, straight after the keystrokes: the corrected guess is the one locked in, and
the held answer shows under the next cell.
"""
from __future__ import annotations

import html
import re

import nbformat
import pytest

from tests import test_browser
from tests.test_browser import ARTIFACTS, ROOT, open_and_run_all, sync_api
from widgets.controls.reveal import WAITING, WORKED_WAITING

# test_browser's fixtures: JupyterLab with Chromium on it, and each test closing what it opened
lab, fresh_tab = test_browser.lab, test_browser.fresh_tab

pytestmark = pytest.mark.browser

BEGINNER_1 = ROOT / "notebooks" / "beginner_1_carrying_bricks.ipynb"
RESEARCHER_4 = ROOT / "notebooks" / "researcher_4_memory_and_time.ipynb"


def held_answers(path) -> list[str]:
    """Each reveal cell's held lines, as the committed notebook folds them under its waiting line."""
    held = []
    for cell in nbformat.read(path, as_version=4).cells:
        for output in cell.get("outputs", []):
            page = "".join(output.get("data", {}).get("text/html", ""))
            if page.startswith(f"<details><summary><i>{WAITING}"):
                (folded,) = re.findall(r"<pre>(.*?)</pre>", page, re.S)
                held.append([line for line in html.unescape(folded).splitlines() if line.strip()])
    return held


def test_run_all_shows_no_answer_before_its_guess_and_a_click_commits_the_corrected_guess(lab):
    held = held_answers(BEGINNER_1)
    assert len(held) == 3 and all(held), held  # knob.grad after a second backward, the trips table, the undivided pile
    open_and_run_all(lab, BEGINNER_1)
    page = lab.panel().inner_text()
    shown = [line for lines in held for line in lines if line in page]
    assert shown == [], f"answers on the page before their guess: {shown}"
    waiting = lab.top_level_widgets().filter(has_text=WAITING)
    assert waiting.count() == 3
    assert "the answer is" not in page  # no prediction's verdict either

    guess = lab.top_level_widgets().filter(has_text="runs once more, with no clearing")
    reveal = waiting.first.element_handle()  # the cell right under that guess
    guess.scroll_into_view_if_needed()
    box = guess.locator("input[type=text]")
    box.click()
    lab.page.keyboard.type("3")  # a first guess ...
    lab.page.keyboard.press("Backspace")
    lab.page.keyboard.type("6")  # ... corrected, then a click at once: no Enter, no pause
    guess.get_by_role("button", name="Commit my guess").click()
    sync_api.expect(guess).to_contain_text("You guessed 6", timeout=20_000)
    sync_api.expect(guess.get_by_role("button", name="Guess locked in")).to_be_disabled()
    assert reveal.wait_for_selector(f"text={held[0][0]}", timeout=20_000)
    assert WAITING not in reveal.inner_text()
    assert lab.top_level_widgets().filter(has_text=WAITING).count() == 2  # the other answers still wait
    lab.page.screenshot(path=str(ARTIFACTS / "pace_guess_committed_by_click.png"))
    assert lab.console_errors() == []


WORD_SPLIT_JS = """note => {
  // every word of the note on one line: a word broken across lines has two boxes
  const text = note.firstChild, words = [...text.data.matchAll(/\\S+/g)];
  return words.filter(w => {
    const range = document.createRange();
    range.setStart(text, w.index);
    range.setEnd(text, w.index + w[0].length);
    return new Set([...range.getClientRects()].map(r => Math.round(r.top))).size > 1;
  }).map(w => w[0]);
}"""


def test_a_bare_letter_is_told_to_take_quotes_in_a_note_that_wraps_at_words(lab):
    open_and_run_all(lab, BEGINNER_1)
    cell = lab.panel().locator(".jp-CodeCell", has_text="ex.one_trip.check(answer)")
    cell.locator(".cm-content").click()
    lab.page.keyboard.press("Control+A")
    lab.page.keyboard.type("answer = B\nex.one_trip.check(answer)")
    lab.page.keyboard.press("Shift+Enter")
    note = cell.locator(".jp-OutputArea-output p", has_text="put it in quotes")
    sync_api.expect(note).to_contain_text("answer = 'B'", timeout=20_000)
    assert "NameError" in cell.inner_text()  # Python's own error stays above the note
    for width in (160, 240, 320):  # a narrow column, where the old note broke "first" into "fir st"
        note.evaluate(f"p => {{ p.style.width = '{width}px'; }}")
        assert note.evaluate(WORD_SPLIT_JS) == [], f"words split across lines at {width} px"
    note.scroll_into_view_if_needed()
    lab.page.screenshot(path=str(ARTIFACTS / "pace_unquoted_letter_note.png"))


def test_a_worked_answer_shows_once_the_learner_checks_an_answer_of_their_own(lab):
    """researcher_4 after Run All: its worked answers wait; a wrong answer of one's own checked releases the first."""
    open_and_run_all(lab, RESEARCHER_4)
    waiting = lab.top_level_widgets().filter(has_text=WORKED_WAITING)
    assert waiting.count() == 2
    worked = waiting.first.element_handle()
    assert not any("2.4e+10" in text for text in lab.panel().locator(".jp-OutputArea").all_inner_texts())
    cell = lab.panel().locator(".jp-CodeCell", has_text="ex.adam_bytes.check(...)")
    cell.locator(".cm-content").click()
    lab.page.keyboard.press("Control+A")
    lab.page.keyboard.type("ex.adam_bytes.check(12e9)")  # wrong, and the learner's own
    lab.page.keyboard.press("Shift+Enter")
    cell = lab.panel().locator(".jp-CodeCell", has_text="ex.adam_bytes.check(12e9)")
    sync_api.expect(cell).to_contain_text("Incorrect", timeout=20_000)
    assert worked.wait_for_selector("text=2.4e+10", timeout=20_000)
    assert lab.top_level_widgets().filter(has_text=WORKED_WAITING).count() == 1
