"""The seam: the defaults are the correct loop, and each bug swaps only its own rules."""
import pytest

from widgets.core.config import BUGS
from widgets.core.loop_rules import BUG_RULES, LoopRules, loop_rules


def test_the_correct_rules_are_the_defaults_and_each_bug_changes_only_its_own():
    assert loop_rules() == LoopRules()
    assert set(BUG_RULES) == set(BUGS)
    seams = {
        "loss_not_divided": {"loss_scale"}, "loss_divided_twice": {"loss_scale"}, "tail_divided_by_k": {"loss_scale"},
        "forget_final_step": {"is_update_step"}, "zero_grad_every_micro_step": {"before_forward"},
        "step_every_micro_step": {"after_backward"}, "scheduler_every_micro_step": {"after_backward"},
        "clip_every_micro_step": {"after_backward", "clip"}, "log_divided_loss": {"logged_loss"},
    }
    correct = LoopRules()
    for bug, expected in seams.items():
        rules = loop_rules(frozenset({bug}))
        changed = {name for name in LoopRules.__dataclass_fields__ if getattr(rules, name) is not getattr(correct, name)}
        assert changed == expected, bug


@pytest.mark.parametrize("bugs, n, K, expected", [
    ((), 4, 4, 0.25), ((), 3, 4, 1 / 3), (("tail_divided_by_k",), 3, 4, 0.25), (("loss_not_divided",), 4, 4, 1.0),
    (("loss_divided_twice",), 4, 4, 1 / 16), (("loss_divided_twice", "tail_divided_by_k"), 2, 4, 1 / 16),
])
def test_loss_scale_rule(bugs, n, K, expected):
    assert loop_rules(frozenset(bugs)).loss_scale(n, K) == pytest.approx(expected)


def test_an_unknown_bug_is_refused_by_name():
    with pytest.raises(ValueError, match="bugs"):
        loop_rules(frozenset({"no_such_bug"}))
