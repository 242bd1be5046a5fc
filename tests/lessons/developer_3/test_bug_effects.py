"""The mistake-by-optimizer table: a constant factor nearly cancels under AdamW, the structural mistakes do not."""
import pytest

from widgets.core.config import waits_for
from widgets.core.mistakes import MISTAKES
from widgets.lessons.developer_3.bug_effects import bug_effect_table


@pytest.fixture(scope="module")
def table():
    return bug_effect_table()


def test_one_row_per_mistake_and_optimizer_with_the_setting_it_needs(table):
    assert list(table.gaps) == [(m, o) for m in MISTAKES for o in ("sgd", "adamw")]
    assert all(not waits_for(m.name, **m.setting) for m in MISTAKES.values())


def test_scale_mistakes_bite_under_sgd_and_nearly_vanish_under_adamw(table):
    for mistake in ("loss_not_divided", "loss_divided_twice"):
        assert MISTAKES[mistake].scales
        assert table.gap(mistake, "sgd") > 0.1 and table.gap(mistake, "adamw") < 1e-4, mistake


def test_structural_mistakes_bite_under_both(table):
    for mistake in ("zero_grad_every_micro_step", "step_every_micro_step", "forget_final_step"):
        assert not MISTAKES[mistake].scales
        assert table.gap(mistake, "sgd") > 0.05 and table.gap(mistake, "adamw") > 0.05, mistake


def test_the_log_mistake_changes_no_weights(table):
    assert table.gap("log_divided_loss", "sgd") < 1e-5 and table.gap("log_divided_loss", "adamw") < 1e-5


def test_the_table_has_a_row_per_mistake_by_its_label(table):
    shown = table.as_table()
    assert shown.headers == ["mistake", "SGD", "AdamW"]
    assert [row[0] for row in shown.rows] == [m.label for m in MISTAKES.values()]


def test_rounding_sized_gaps_are_printed_as_a_bound_not_their_digits(table):
    # their last digits depend on the CPU's vector unit (ATEN_CPU_CAPABILITY), so nbval could not pin them
    rows = {row[0]: row[1:] for row in table.as_table().rows}
    assert rows[MISTAKES["log_divided_loss"].label] == ["< 1e-05", "< 1e-05"]
    big = rows[MISTAKES["loss_not_divided"].label]
    assert big == [f"{table.gap('loss_not_divided', 'sgd'):.2g}", "< 1e-05"]
