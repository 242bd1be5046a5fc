"""Adam's two rules for a batch k times larger, against their definitions."""
import math

import pytest

from widgets.research.adam_rules import malladi_scaled, same_half_life


@pytest.mark.parametrize("k", [0.5, 2, 4, 8])
def test_malladi_rule_by_definition(k):
    lr, b1, b2, eps = malladi_scaled(1e-3, 0.9, 0.999, 1e-8, k)
    assert lr == pytest.approx(1e-3 * math.sqrt(k))
    assert 1 - b1 == pytest.approx(k * 0.1) and 1 - b2 == pytest.approx(k * 0.001)
    assert eps == pytest.approx(1e-8 / math.sqrt(k))


def test_malladi_rule_is_returned_past_its_range_for_the_notebook_to_show():
    assert malladi_scaled(1e-3, 0.9, 0.999, 1e-8, 16)[1] == pytest.approx(-0.6)


@pytest.mark.parametrize("beta, k", [(0.999, 4), (0.9, 16), (0.95, 0.5)])
def test_half_life_rule_stays_a_beta_and_agrees_to_first_order(beta, k):
    new = same_half_life(beta, k)
    assert 0 <= new < 1
    assert math.log(new) / math.log(beta) == pytest.approx(k)  # k updates of the old beta in one
    assert same_half_life(0.9999, 2) == pytest.approx(1 - 2 * (1 - 0.9999), abs=1e-7)  # first order
