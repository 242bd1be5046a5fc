"""Each bug's sentence names it with a number; a clean run has none; clipping that hides a bug is said."""
import pytest

from widgets.core.config import BUGS, AccumulationConfig
from widgets.core.symptoms import bug_symptoms
from widgets.core.training import run_regimes

# What a bug needs in the config before it can show (a tail, clipping, a warmup).
NEEDS = {"forget_final_step": dict(tail_micro_batches=2), "tail_divided_by_k": dict(tail_micro_batches=2),
         "clip_every_micro_step": dict(max_grad_norm=0.1), "scheduler_every_micro_step": dict(warmup_updates=4)}


@pytest.mark.parametrize("bug", sorted(BUGS))
def test_each_bug_has_a_symptom_sentence_with_a_number(bug):
    needs = NEEDS.get(bug, {})
    config = AccumulationConfig(accumulation_steps=4, micro_batch_size=4, num_updates=2, bugs={bug}, **needs)
    record = run_regimes(config)
    (sentence,) = bug_symptoms(record)
    assert any(ch.isdigit() for ch in sentence)
    assert bug_symptoms(run_regimes(AccumulationConfig(num_updates=2, **needs))) == []


def test_clipping_that_hides_the_scale_bug_is_named():
    config = AccumulationConfig(bugs={"loss_not_divided"}, max_grad_norm=0.05)
    record = run_regimes(config)
    assert record.grads_allclose  # both gradients clipped to the same length: the bug is invisible
    assert any("hides this bug" in line for line in bug_symptoms(record))


def test_a_non_record_is_refused_by_name():
    with pytest.raises(TypeError, match="record"):
        bug_symptoms("record")


def test_the_adamw_gap_at_the_rounding_floor_is_a_bound_the_same_on_every_cpu():
    """Its digits differ per CPU (3e-07 on avx2, 3.8e-07 on default); the explorer prints this line."""
    record = run_regimes(AccumulationConfig(optimizer="adamw", learning_rate=0.01, num_updates=6,
                                            bugs={"loss_not_divided"}))
    assert record.weight_gap < 1e-5
    (line,) = [s for s in bug_symptoms(record) if "nearly cancels" in s]
    assert line.endswith("is below 1e-05 x |w_big_batch - w_start|"), line
