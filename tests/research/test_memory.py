"""The memory terms against the tensors' own nbytes; activations grow with b, the rest do not."""
import pytest
import torch

from widgets.core.config import BudgetError
from widgets.research.memory import (
    SavedTensorCounter, TinyGPT, measure_memory_terms, micro_step_estimate, tensor_bytes,
    tiny_gpt_parameters,
)
from widgets.research.planner import activation_bytes_per_layer

MODEL = TinyGPT(layers=1, hidden=32, heads=2, seq_len=16, vocab=64)


def test_fixed_terms_are_the_tensors_nbytes():
    terms = measure_memory_terms(MODEL, 2)
    params = sum(p.numel() * p.element_size() for p in MODEL.parameters())
    assert terms.parameters == params == terms.gradients
    assert terms.optimizer_state == 2 * params  # Adam: exp_avg and exp_avg_sq, one float32 each


def test_activations_grow_with_b_and_the_rest_stay():
    one, four = measure_memory_terms(MODEL, 1), measure_memory_terms(MODEL, 4)
    assert one.fixed == four.fixed
    assert four.activations == pytest.approx(4 * one.activations, rel=0.05)
    assert one.saved_total > one.activations  # the saved weights are counted, then subtracted


def test_checkpointing_keeps_less_and_runs_the_forward_twice():
    plain, ckpt = measure_memory_terms(MODEL, 2), measure_memory_terms(MODEL, 2, checkpointing=True)
    assert ckpt.activations < plain.activations / 2
    assert (plain.forward_passes, ckpt.forward_passes) == (1, 2)


def test_counter_counts_each_storage_once():
    w = torch.nn.Parameter(torch.ones(3))
    x = torch.ones(5, 3, requires_grad=True)
    with SavedTensorCounter(torch.nn.ParameterList([w])) as saved:
        (x * w).sum()  # mul saves both x and w
    assert saved.total == x.nbytes + w.nbytes and saved.parameter_bytes == w.nbytes


def test_one_layer_is_close_to_the_published_formula_at_float32():
    # per-layer bytes measured as the difference between 2 layers and 1 layer
    kw = dict(hidden=64, heads=4, seq_len=32, vocab=128)
    one = measure_memory_terms(TinyGPT(layers=1, **kw), 1).activations
    two = measure_memory_terms(TinyGPT(layers=2, **kw), 1).activations
    formula = activation_bytes_per_layer(32, 1, 64, 4, element_bytes=4, mask_bytes=1)
    assert (two - one) == pytest.approx(formula, rel=0.25)


def test_helpers_and_bad_input():
    assert tensor_bytes([torch.zeros(4), None]) == 16
    with pytest.raises(ValueError, match="micro_batch_size"):
        measure_memory_terms(MODEL, 0)
    with pytest.raises(TypeError, match="model"):
        measure_memory_terms(torch.nn.Linear(2, 2), 1)
    with pytest.raises(ValueError, match="heads"):
        TinyGPT(hidden=10, heads=3)


# --- the ceiling, checked on the sizes before any tensor exists ------------------------------------

def test_parameter_count_on_paper_is_the_model_s():
    for kw in (dict(layers=1, hidden=32, heads=2, seq_len=16, vocab=64), dict(layers=3, hidden=48, heads=4, seq_len=8, vocab=10)):
        assert tiny_gpt_parameters(kw["layers"], kw["hidden"], kw["seq_len"], kw["vocab"]) == sum(
            p.numel() for p in TinyGPT(**kw).parameters())


def test_the_estimate_is_above_what_a_micro_step_holds():
    kw = dict(layers=2, hidden=64, heads=4, seq_len=32, vocab=128)
    terms = measure_memory_terms(TinyGPT(**kw), 8)
    needs, seconds = micro_step_estimate(**kw, micro_batch_size=8)
    assert terms.parameters + terms.total <= needs <= 2 * (terms.parameters + terms.total)  # the copy, then the terms
    assert seconds > 0


def test_sizes_past_the_ceiling_are_refused_with_the_estimate_and_the_limit(monkeypatch):
    monkeypatch.delenv("LAB_MEMORY_LIMIT_MB", raising=False)
    monkeypatch.delenv("LAB_TIME_LIMIT_S", raising=False)
    with pytest.raises(BudgetError, match=r"TinyGPT\(layers=64, hidden=4096.*about 49\.5 GB, over this lab's limit of 1\.0 GB"):
        TinyGPT(layers=64, hidden=4096, heads=4, vocab=100_000)
    with pytest.raises(BudgetError, match=r"micro_batch_size=4096 would need about \d+\.\d GB.*LAB_MEMORY_LIMIT_MB"):
        measure_memory_terms(TinyGPT(seq_len=4096), 4096)
    monkeypatch.setenv("LAB_MEMORY_LIMIT_MB", "4")  # the ceiling is the environment's: 4 MB refuses a 6 MB step
    with pytest.raises(BudgetError, match="limit of 4 MB"):
        measure_memory_terms(TinyGPT(layers=2, dropout=0.0), 8)
    monkeypatch.setenv("LAB_MEMORY_LIMIT_MB", "1024")
    monkeypatch.setenv("LAB_TIME_LIMIT_S", "0.001")
    with pytest.raises(BudgetError, match=r"would run about \d+ s, over this lab's limit of 0\.001 s"):
        measure_memory_terms(MODEL, 2)


# --- the peak over forward and backward ---------------------------------------------------------

def test_peak_counter_counts_new_storages_alive_at_once():
    from widgets.research.saved_bytes import PeakBytesCounter
    x = torch.ones(1000)  # 4000 bytes, there before: not counted
    with PeakBytesCounter() as counter:
        y = x * 2          # +4000
        z = y + 1          # +4000: 8000 alive, the peak
        del y              # -4000
        z.add_(1)          # in place: no new storage
        w = z.view(10, 100)  # a view: no new storage
        v = x[:10]           # a view of a storage from before
    assert (counter.now, counter.peak) == (4000, 8000)
    assert w.shape == (10, 100) and v.shape == (10,)


def test_peak_sees_backward_and_the_recomputation():
    plain, ckpt = measure_memory_terms(MODEL, 4), measure_memory_terms(MODEL, 4, checkpointing=True)
    assert plain.peak > plain.activations  # backward allocates while the saved tensors are alive
    assert ckpt.activations < plain.activations / 2  # after the forward: a large cut ...
    assert ckpt.peak > 2 * ckpt.activations and ckpt.peak / plain.peak > 0.4  # ... the peak: a small one
    assert measure_memory_terms(MODEL, 4, checkpointing=True).peak == ckpt.peak  # deterministic


def test_peak_grows_with_b():
    one, four = measure_memory_terms(MODEL, 1), measure_memory_terms(MODEL, 4)
    assert 3 * one.peak < four.peak <= 4 * one.peak
