"""Each mistake's sentence gives it away with a number; a clean run has none; clipping that hides one is said."""
import pytest

from widgets.core.config import AccumulationConfig
from widgets.core.mistakes import MISTAKES
from widgets.lessons.beginner_2.draw import mistake_symptoms
from widgets.core.training import run_regimes


@pytest.mark.parametrize("mistake", sorted(MISTAKES))
def test_each_mistake_has_a_short_symptom_sentence_with_a_number(mistake):
    needs = {**MISTAKES[mistake].setting, **({"max_grad_norm": 0.1} if "max_grad_norm" in MISTAKES[mistake].needs else {})}
    config = AccumulationConfig(accumulation_steps=4, micro_batch_size=4, num_updates=2, mistake=mistake, **needs)
    record = run_regimes(config)
    sentences = mistake_symptoms(record)
    assert 1 <= len(sentences) <= 2 and any(ch.isdigit() for ch in sentences[0])
    assert all(len(sentence) <= 100 for sentence in sentences)  # a printed line fits the page
    assert mistake_symptoms(run_regimes(AccumulationConfig(num_updates=2, **needs))) == []


def test_clipping_that_hides_the_scale_mistake_is_named():
    config = AccumulationConfig(mistake="loss_not_divided", max_grad_norm=0.05)
    record = run_regimes(config)
    assert record.grads_allclose  # both gradients clipped to the same length: the mistake is invisible
    assert any("hides this mistake" in line for line in mistake_symptoms(record))


def test_the_adamw_gap_at_the_rounding_floor_is_a_bound_the_same_on_every_cpu():
    """Its digits differ per CPU (3e-07 on avx2, 3.8e-07 on default); the explorer prints this line."""
    record = run_regimes(AccumulationConfig(optimizer="adamw", learning_rate=0.01, num_updates=6,
                                            mistake="loss_not_divided"))
    assert record.weight_gap < 1e-5
    (line,) = [s for s in mistake_symptoms(record) if "nearly cancels" in s]
    assert line.endswith("is below 1e-05 x |w_big_batch - w_start|"), line
