"""The bug-by-optimizer table: a constant factor nearly cancels under AdamW, the structural bugs do not."""
import pytest

from widgets.lessons.developer_3.bug_effects import BUG_SETTINGS, bug_effect_table
from widgets.core.config import BUGS, unmet_bug_needs


@pytest.fixture(scope="module")
def table():
    return bug_effect_table()


def test_one_row_per_bug_and_optimizer(table):
    assert [(r.bug, r.optimizer) for r in table.rows] == [(b, o) for b in BUGS for o in ("sgd", "adamw")]
    assert all(not unmet_bug_needs(frozenset({b}), **BUG_SETTINGS.get(b, {})) for b in BUGS)


def test_scale_bugs_bite_under_sgd_and_nearly_vanish_under_adamw(table):
    for bug in ("loss_not_divided", "loss_divided_twice"):
        assert table.gap(bug, "sgd") > 0.1 and table.gap(bug, "adamw") < 1e-4, bug


def test_structural_bugs_bite_under_both(table):
    for bug in ("zero_grad_every_micro_step", "step_every_micro_step", "forget_final_step"):
        assert table.gap(bug, "sgd") > 0.05 and table.gap(bug, "adamw") > 0.05, bug


def test_the_log_bug_changes_no_weights(table):
    assert table.gap("log_divided_loss", "sgd") < 1e-5 and table.gap("log_divided_loss", "adamw") < 1e-5


def test_text_has_a_line_per_bug(table):
    text = table.as_text().splitlines()
    assert len(text) == 1 + len(BUGS) and text[0].split() == ["bug", "sgd", "adamw"]


@pytest.mark.parametrize("optimizers", [(), "sgd", ("rmsprop",)])
def test_bad_optimizers_are_refused(optimizers):
    with pytest.raises(ValueError, match="optimizers"):
        bug_effect_table(optimizers)
    with pytest.raises(KeyError, match="no row"):
        bug_effect_table(("sgd",), num_updates=1).gap("loss_not_divided", "adamw")


def test_rounding_sized_gaps_are_printed_as_a_bound_not_their_digits(table):
    # their last digits depend on the CPU's vector unit (ATEN_CPU_CAPABILITY), so nbval could not pin them
    row = next(line for line in table.as_text().splitlines() if line.startswith("log_divided_loss"))
    assert row.split()[1:] == ["<", "1e-05", "<", "1e-05"]
    big = next(line for line in table.as_text().splitlines() if line.startswith("loss_not_divided"))
    assert f"{table.gap('loss_not_divided', 'sgd'):.2g}" in big and "< 1e-05" in big
