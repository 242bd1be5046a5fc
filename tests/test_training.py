"""The three regimes: accumulated matches big batch exactly; each bug switch breaks that."""
import math

import pytest
import torch

from widgets.config import AccumulationConfig
from widgets.training import REGIMES, run_regimes


@pytest.mark.parametrize("K, b", [(1, 1), (2, 3), (4, 8), (7, 5), (16, 64)])
def test_accumulated_run_matches_big_batch(K, b):
    record = run_regimes(AccumulationConfig(accumulation_steps=K, micro_batch_size=b, num_updates=4))
    assert record.allclose, record.max_grad_diff
    # same gradients at every update, so the same weights and losses, up to float rounding
    assert record.eval_loss["accumulated"] == pytest.approx(record.eval_loss["big_batch"], rel=1e-4)


@pytest.mark.parametrize("bug", ["loss_not_divided", "zero_grad_every_micro_step", "step_every_micro_step"])
@pytest.mark.parametrize("K, b", [(2, 4), (4, 8), (16, 2)])
def test_each_bug_leaves_the_big_batch_run(bug, K, b):
    record = run_regimes(AccumulationConfig(accumulation_steps=K, micro_batch_size=b, num_updates=4, bugs={bug}))
    assert not record.allclose
    assert record.eval_loss["accumulated"][-1] != pytest.approx(record.eval_loss["big_batch"][-1], rel=1e-3)


@pytest.mark.parametrize("bug", ["loss_not_divided", "zero_grad_every_micro_step", "step_every_micro_step"])
def test_bugs_change_nothing_when_k_is_one(bug):
    record = run_regimes(AccumulationConfig(accumulation_steps=1, micro_batch_size=8, num_updates=3, bugs={bug}))
    assert record.allclose


def test_loss_not_divided_gives_k_times_the_gradient():
    record = run_regimes(AccumulationConfig(accumulation_steps=4, micro_batch_size=8, num_updates=1, bugs={"loss_not_divided"}))
    assert torch.allclose(record.first_pile.accumulated, 4 * record.first_target, rtol=1e-4, atol=1e-6)


def test_same_config_gives_a_bit_identical_record():
    config = AccumulationConfig(accumulation_steps=3, micro_batch_size=5, num_updates=5, tail_micro_batches=2)
    a, b = run_regimes(config), run_regimes(config)
    assert a.train_loss == b.train_loss and a.eval_loss == b.eval_loss and a.grad_diff == b.grad_diff
    assert torch.equal(a.first_pile.pile, b.first_pile.pile)


def test_record_counts_passes_steps_and_boundaries():
    config = AccumulationConfig(accumulation_steps=4, micro_batch_size=2, num_updates=3, tail_micro_batches=2)
    record = run_regimes(config)
    assert record.passes_per_update == {"accumulated": 4, "big_batch": 1, "small_batch": 1}
    assert record.optimizer_steps == {r: 4 for r in REGIMES}  # 3 full groups + the tail
    assert record.update_flags == [False, False, False, True] * 3 + [False, True]
    assert all(len(record.eval_loss[r]) == 4 for r in REGIMES)
    assert record.allclose  # the tail is weighted by its real size, so it is exact too


def test_logged_loss_is_the_undivided_mean():
    config = AccumulationConfig(accumulation_steps=4, micro_batch_size=8, num_updates=2)
    record = run_regimes(config)
    # the first update starts from the same weights in both regimes, on the same 32 examples
    assert record.train_loss["accumulated"][0] == pytest.approx(record.train_loss["big_batch"][0], rel=1e-5)


def test_step_every_micro_step_counts_k_steps_per_update():
    config = AccumulationConfig(accumulation_steps=4, micro_batch_size=8, num_updates=3, bugs={"step_every_micro_step"})
    assert run_regimes(config).optimizer_steps["accumulated"] == 12


def test_divergence_is_recorded_not_raised():
    config = AccumulationConfig(accumulation_steps=8, micro_batch_size=8, learning_rate=10.0, bugs={"loss_not_divided"})
    record = run_regimes(config)
    assert record.diverged_at["accumulated"] is not None
    assert not record.allclose
    assert not math.isfinite(record.eval_loss["accumulated"][-1]) or record.eval_loss["accumulated"][-1] > 1e3


def test_run_rejects_a_non_config():
    with pytest.raises(TypeError, match="config"):
        run_regimes({"accumulation_steps": 4})
