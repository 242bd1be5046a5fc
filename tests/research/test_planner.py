"""Paper formulas and the (b, K) planner."""
import pytest

from widgets.research.planner import PRESETS, TransformerShape, activation_bytes_per_layer, best_plan
from widgets.research.planner import plan_micro_batches, transformer_memory


def test_formula_is_korthikanti_at_16_bit():
    s, b, h, a = 2048, 1, 4096, 32
    assert activation_bytes_per_layer(s, b, h, a) == s * b * h * (34 + 5 * a * s / h)
    assert activation_bytes_per_layer(s, b, h, a, recompute=True) == 2 * s * b * h


def test_presets_have_their_sizes():
    assert PRESETS["GPT-2 small"].parameters == pytest.approx(124e6, rel=0.01)
    assert PRESETS["1B"].parameters == pytest.approx(1.3e9, rel=0.1)
    assert PRESETS["7B"].parameters == pytest.approx(6.7e9, rel=0.05)


def test_mixed_precision_adam_is_16_bytes_per_parameter():
    m = transformer_memory(PRESETS["7B"], 1)
    assert m.fixed == 16 * PRESETS["7B"].parameters
    assert transformer_memory(PRESETS["7B"], 4).activations == 4 * m.activations
    assert transformer_memory(PRESETS["7B"], 4, recompute=True).activations < m.activations


def test_planner_lists_divisors_and_marks_what_fits():
    plans = plan_micro_batches(1000, 100.0, 1500, 8, micro_step_seconds=lambda b: 1.0 + b)
    assert [(p.micro_batch_size, p.accumulation_steps) for p in plans] == [(1, 8), (2, 4), (4, 2), (8, 1)]
    assert [p.fits for p in plans] == [True, True, True, False]
    assert plans[0].seconds_per_update == 8 * 2.0
    assert best_plan(plans).micro_batch_size == 4
    assert best_plan(plan_micro_batches(1000, 1000.0, 1001, 4)) is None


@pytest.mark.parametrize("kwargs, error, words", [
    (dict(memory_budget=1000), ValueError, "memory_budget"),
    (dict(memory_budget=0), ValueError, "memory_budget"),
    (dict(effective_batch_size=0), ValueError, "effective_batch_size"),
    (dict(activation_bytes_per_example=-1.0), ValueError, "activation_bytes_per_example"),
    (dict(fixed_bytes=1.5), TypeError, "fixed_bytes"),
])
def test_bad_input_names_the_parameter(kwargs, error, words):
    args = dict(fixed_bytes=1000, activation_bytes_per_example=10.0, memory_budget=5000, effective_batch_size=8)
    with pytest.raises(error, match=words):
        plan_micro_batches(**{**args, **kwargs})


def test_bad_shapes():
    with pytest.raises(ValueError, match="heads"):
        TransformerShape("x", 2, 10, 3, 8, 10)
    with pytest.raises(TypeError, match="shape"):
        transformer_memory("7B", 1)
    with pytest.raises(ValueError, match="seq_len"):
        activation_bytes_per_layer(0, 1, 8, 2)
