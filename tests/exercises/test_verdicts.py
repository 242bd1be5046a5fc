"""widgets.exercises.verdicts: an audit reads as one line naming each mistake and its fix, the report folded."""

from widgets.audit import audit_training_loop
from widgets.exercises.verdicts import verdict


def _right(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    for i, (x, y) in enumerate(batches):
        start = i - i % accumulation_steps
        n = sum(len(t) for _, t in batches[start : start + accumulation_steps])
        (loss_fn(model(x), y) * len(y) / n).backward()
        if (i + 1) % accumulation_steps == 0 or i == len(batches) - 1:
            optimizer.step()
            optimizer.zero_grad()


def _undivided(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    for i, (x, y) in enumerate(batches):
        loss_fn(model(x), y).backward()
        if (i + 1) % accumulation_steps == 0 or i == len(batches) - 1:
            optimizer.step()
            optimizer.zero_grad()


def test_a_right_loop_gets_a_tick_and_the_report_folded_away():
    shown = verdict(audit_training_loop(_right))
    assert repr(shown).startswith("✓ _right matches the reference")
    html = shown._repr_html_()
    assert "<details>" in html and "Verdict: matches the reference." in html


def test_a_wrong_loop_gets_one_line_naming_its_mistake_its_factor_and_the_fix():
    line = repr(verdict(audit_training_loop(_undivided)))
    assert "\n" not in line
    assert line.startswith("✗ _undivided: loss_not_divided: ") and "— fix: weight each" in line
    _undivided.__name__ = "loss_not_divided"  # a loop named after its mistake says the name once
    try:
        assert repr(verdict(audit_training_loop(_undivided))).startswith("✗ loss_not_divided: each micro-batch")
    finally:
        _undivided.__name__ = "_undivided"
    assert "4, 4," in line  # each full update's factor
