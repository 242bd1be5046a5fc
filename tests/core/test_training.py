"""The three regimes: accumulated matches big batch exactly; each mistake's loop breaks that."""
import dataclasses
import math

import pytest
import torch

from widgets.core.accumulation import make_model
from widgets.core.config import AccumulationConfig
from widgets.core.training import (
    PLOTTED_ENTRIES, REGIMES, _draws_and_references, clip_flat, example_order, linear_warmup, run_regimes
)


@pytest.mark.parametrize("K, b", [(1, 1), (2, 3), (4, 8), (7, 5), (16, 64)])
def test_accumulated_run_matches_big_batch(K, b):
    record = run_regimes(AccumulationConfig(accumulation_steps=K, micro_batch_size=b, num_updates=4))
    assert record.grads_allclose and record.learning_rates_match, record.max_grad_diff
    assert record.matches_big_batch
    # same gradients at every update, so the same weights and losses, up to float rounding
    assert record.eval_loss["accumulated"] == pytest.approx(record.eval_loss["big_batch"], rel=1e-4)


@pytest.mark.parametrize("bug", ["loss_not_divided", "zero_grad_every_micro_step", "step_every_micro_step"])
@pytest.mark.parametrize("K, b", [(2, 4), (4, 8), (16, 2)])
def test_each_bug_leaves_the_big_batch_run(bug, K, b):
    record = run_regimes(AccumulationConfig(accumulation_steps=K, micro_batch_size=b, num_updates=4, mistake=bug))
    assert not record.grads_allclose and record.learning_rates_match
    assert record.eval_loss["accumulated"][-1] != pytest.approx(record.eval_loss["big_batch"][-1], rel=1e-3)


@pytest.mark.parametrize("bug", ["loss_not_divided", "zero_grad_every_micro_step", "step_every_micro_step"])
def test_bugs_change_nothing_when_k_is_one(bug):
    record = run_regimes(AccumulationConfig(accumulation_steps=1, micro_batch_size=8, num_updates=3, mistake=bug))
    assert record.matches_big_batch


def test_loss_not_divided_gives_k_times_the_gradient():
    record = run_regimes(AccumulationConfig(accumulation_steps=4, micro_batch_size=8, num_updates=1, mistake="loss_not_divided"))
    assert torch.allclose(record.first_pile.accumulated, 4 * record.first_target, rtol=1e-4, atol=1e-6)


def test_same_config_gives_a_bit_identical_record():
    config = AccumulationConfig(accumulation_steps=3, micro_batch_size=5, num_updates=5, tail_micro_batches=2)
    a, b = run_regimes(config), run_regimes(config)
    assert a.train_loss == b.train_loss and a.eval_loss == b.eval_loss and a.grad_diff == b.grad_diff
    assert torch.equal(a.first_pile.pile, b.first_pile.pile)


def test_a_mistake_switch_trains_the_accumulated_run_alone_and_reuses_the_others_unchanged():
    config = AccumulationConfig(accumulation_steps=3, micro_batch_size=5, num_updates=5, seed=7)
    _draws_and_references.cache_clear()
    correct = run_regimes(config)
    buggy = run_regimes(dataclasses.replace(config, mistake="loss_not_divided"))
    assert _draws_and_references.cache_info().hits == 1
    for regime in ("big_batch", "small_batch"):
        assert buggy.eval_loss[regime] is correct.eval_loss[regime]
    _draws_and_references.cache_clear()  # trained afresh, after the mistake: the same bits
    fresh = run_regimes(dataclasses.replace(config, mistake="loss_not_divided"))
    for regime in REGIMES:
        assert fresh.eval_loss[regime] == buggy.eval_loss[regime]
        assert torch.equal(fresh.final_weights[regime], buggy.final_weights[regime])
    assert fresh.grad_diff == buggy.grad_diff and torch.equal(fresh.first_pile.pile, buggy.first_pile.pile)


def test_record_counts_passes_steps_and_boundaries():
    config = AccumulationConfig(accumulation_steps=4, micro_batch_size=2, num_updates=3, tail_micro_batches=2)
    record = run_regimes(config)
    assert record.passes_per_update == {"accumulated": 4, "big_batch": 1, "small_batch": 1}
    assert record.optimizer_steps == {r: 4 for r in REGIMES}  # 3 full windows + the tail
    assert all(len(record.eval_loss[r]) == 4 for r in REGIMES)
    assert record.matches_big_batch  # the tail is weighted by its real size, so it is exact too


def test_logged_loss_is_the_undivided_mean():
    config = AccumulationConfig(accumulation_steps=4, micro_batch_size=8, num_updates=2)
    record = run_regimes(config)
    # the first update starts from the same weights in both regimes, on the same 32 examples
    assert record.train_loss["accumulated"][0] == pytest.approx(record.train_loss["big_batch"][0], rel=1e-5)


def test_step_every_micro_step_counts_k_steps_per_update():
    config = AccumulationConfig(accumulation_steps=4, micro_batch_size=8, num_updates=3, mistake="step_every_micro_step")
    assert run_regimes(config).optimizer_steps["accumulated"] == 12


def test_divergence_is_recorded_not_raised():
    config = AccumulationConfig(accumulation_steps=8, micro_batch_size=8, learning_rate=10.0, mistake="loss_not_divided")
    record = run_regimes(config)
    assert record.diverged_at["accumulated"] is not None
    assert not record.grads_allclose
    assert not math.isfinite(record.eval_loss["accumulated"][-1]) or record.eval_loss["accumulated"][-1] > 1e3


def test_run_rejects_a_non_config():
    with pytest.raises(TypeError, match="config"):
        run_regimes({"accumulation_steps": 4})


# The newer bugs and the settings each needs to act at all.
NEW_BUGS = {
    "loss_divided_twice": {},
    "forget_final_step": dict(tail_micro_batches=2),
    "tail_divided_by_k": dict(tail_micro_batches=2),
    "clip_every_micro_step": dict(max_grad_norm=0.1),
    "scheduler_every_micro_step": dict(warmup_updates=4),
}


@pytest.mark.parametrize("bug", sorted(NEW_BUGS))
@pytest.mark.parametrize("K, b", [(4, 8), (8, 2)])
def test_each_new_bug_leaves_the_big_batch_run(bug, K, b):
    config = AccumulationConfig(accumulation_steps=K, micro_batch_size=b, num_updates=4, mistake=bug, **NEW_BUGS[bug])
    record = run_regimes(config)
    assert not record.matches_big_batch
    assert record.eval_loss["accumulated"][-1] != pytest.approx(record.eval_loss["big_batch"][-1], rel=1e-3)
    # the same settings without the bug are exact: the settings alone are not what breaks it
    clean = AccumulationConfig(accumulation_steps=K, micro_batch_size=b, num_updates=4, **NEW_BUGS[bug])
    assert run_regimes(clean).matches_big_batch


def test_clipping_and_warmup_apply_per_update_to_every_regime_and_stay_exact():
    config = AccumulationConfig(accumulation_steps=4, micro_batch_size=8, num_updates=5, max_grad_norm=0.3,
                                warmup_updates=3, tail_micro_batches=3)
    record = run_regimes(config)
    assert record.matches_big_batch and record.log_matches
    assert record.first_target.norm() > 0.3  # so clipping really acted
    expected = [0.1 * min(1.0, (u + 1) / 4) for u in range(6)]
    for regime in REGIMES:
        assert record.learning_rates[regime] == pytest.approx(expected)
    assert record.eval_loss["accumulated"] == pytest.approx(record.eval_loss["big_batch"], rel=1e-4)


def test_clip_flat_matches_torch_clipping():
    model = torch.nn.Linear(3, 2)
    for p in model.parameters():
        p.grad = torch.arange(p.numel(), dtype=torch.float32).reshape(p.shape) - 2.0
    flat = torch.cat([p.grad.reshape(-1) for p in model.parameters()])
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.5)
    clipped = torch.cat([p.grad.reshape(-1) for p in model.parameters()])
    assert torch.allclose(clip_flat(flat, 1.5), clipped, rtol=1e-6, atol=1e-7)
    assert torch.equal(clip_flat(flat, None), flat)
    assert torch.equal(clip_flat(flat, 1e6), flat)  # below the limit: untouched


def test_linear_warmup_ramps_over_w_updates():
    assert [linear_warmup(3)(n) for n in range(5)] == [0.25, 0.5, 0.75, 1.0, 1.0]
    assert linear_warmup(0)(0) == 1.0
    with pytest.raises(ValueError, match="warmup_updates"):
        linear_warmup(-1)


def test_loss_divided_twice_is_one_over_k_too_small():
    config = AccumulationConfig(accumulation_steps=4, micro_batch_size=8, num_updates=1, mistake="loss_divided_twice")
    record = run_regimes(config)
    assert torch.allclose(record.first_pile.accumulated, record.first_target / 4, rtol=1e-4, atol=1e-7)
    assert record.grad_scale[0] == pytest.approx(0.25, rel=1e-5)


def test_forget_final_step_leaves_the_tail_unapplied():
    config = AccumulationConfig(accumulation_steps=4, micro_batch_size=4, num_updates=3, tail_micro_batches=2,
                                mistake="forget_final_step")
    record = run_regimes(config)
    assert record.optimizer_steps == {"accumulated": 3, "big_batch": 4, "small_batch": 4}
    assert record.grads_match == [True, True, True, False] and record.grad_scale[-1] == 0.0
    assert record.eval_loss["accumulated"][-1] == record.eval_loss["accumulated"][-2]  # the weights never moved


def test_tail_divided_by_k_under_weights_the_tail_by_its_share():
    config = AccumulationConfig(accumulation_steps=4, micro_batch_size=4, num_updates=2, tail_micro_batches=1,
                                mistake="tail_divided_by_k")
    record = run_regimes(config)
    assert record.grads_match == [True, True, False]
    assert record.grad_scale[-1] == pytest.approx(1 / 4, rel=1e-5)


def test_log_divided_loss_changes_only_the_log():
    """The verdicts are about the training (gradients, learning rates), so they stay True; the log is off by K."""
    config = AccumulationConfig(accumulation_steps=4, micro_batch_size=8, num_updates=3, tail_micro_batches=2,
                                mistake="log_divided_loss")
    record = run_regimes(config)
    clean = run_regimes(AccumulationConfig(accumulation_steps=4, micro_batch_size=8, num_updates=3,
                                           tail_micro_batches=2))
    assert record.matches_big_batch and not record.log_matches
    assert record.eval_loss == clean.eval_loss
    assert record.true_train_loss == pytest.approx(clean.train_loss["accumulated"], rel=1e-6)  # float32 sum vs float64
    ratios = [t / logged for t, logged in zip(record.true_train_loss, record.train_loss["accumulated"])]
    assert ratios == pytest.approx([4, 4, 4, 4])  # divided by K once more, the short last window too
    assert clean.log_matches


def test_scheduler_every_micro_step_ends_the_warmup_k_times_sooner():
    config = AccumulationConfig(accumulation_steps=4, micro_batch_size=8, num_updates=4, warmup_updates=8,
                                mistake="scheduler_every_micro_step")
    record = run_regimes(config)
    assert all(record.grads_match)  # each gradient is right; the learning rate it is applied with is not
    assert record.grads_allclose and not record.learning_rates_match and not record.matches_big_batch
    assert record.learning_rates["big_batch"] == pytest.approx([0.1 * (u + 1) / 9 for u in range(4)])
    assert record.learning_rates["accumulated"] == pytest.approx([0.1 * min(1, 4 * (u + 1) / 9) for u in range(4)])


def test_clip_every_micro_step_squashes_the_half_built_pile():
    config = AccumulationConfig(accumulation_steps=4, micro_batch_size=8, num_updates=2, max_grad_norm=0.1,
                                mistake="clip_every_micro_step")
    record = run_regimes(config)
    clean = run_regimes(AccumulationConfig(accumulation_steps=4, micro_batch_size=8, num_updates=2, max_grad_norm=0.1))
    bug, right = record.first_pile.pile, clean.first_pile.pile
    assert torch.equal(bug[0], right[0])  # the same first backward pass
    # the next backward adds the same micro-batch gradient onto a pile that was clipped in between
    assert torch.allclose(bug[1] - right[1], clip_flat(right[0], 0.1) - right[0], atol=1e-7)
    assert float(right[0].norm()) > 0.1  # so that clip really cut the half-built pile
    assert float(record.first_applied.norm()) <= 0.1 + 1e-6 and not record.grads_match[0]


@pytest.mark.parametrize(
    "call, error, word",
    [
        (lambda: example_order(None), TypeError, "config"),
        (lambda: linear_warmup(2.0), TypeError, "warmup_updates"),
    ],
)
def test_new_functions_refuse_bad_input_naming_the_parameter(call, error, word):
    with pytest.raises(error, match=word):
        call()


def test_plotted_parameters_are_found_by_name():
    record = run_regimes(AccumulationConfig(num_updates=1))
    assert record.plotted_parameters == {"0.weight[0]": 0, "2.weight[0]": 32, "2.bias": 48}  # hidden = 16
    flat = torch.cat([p.detach().reshape(-1) for p in make_model(seed=0).parameters()])
    named = dict(make_model(seed=0).named_parameters())
    for (name, element), index in zip(PLOTTED_ENTRIES, record.plotted_parameters.values()):
        assert flat[index] == named[name].reshape(-1)[element]


def test_only_learning_rates_differing_is_its_own_verdict():
    config = AccumulationConfig(accumulation_steps=4, micro_batch_size=8, num_updates=3, warmup_updates=3,
                                mistake="scheduler_every_micro_step")
    record = run_regimes(config)
    assert record.grads_allclose and record.max_grad_diff < 1e-6
    assert not record.learning_rates_match


def test_a_run_that_blows_up_but_stays_finite_counts_as_diverged():
    """lr 10, K = 16, b = 64: both losses pass 1e30 while staying finite, and their gradients stay
    relatively close; the record calls that divergence, not agreement."""
    record = run_regimes(AccumulationConfig(accumulation_steps=16, micro_batch_size=64, learning_rate=10.0, num_updates=8))
    assert record.both_diverged and not record.grads_allclose
    assert len(record.eval_loss["accumulated"]) == record.diverged_at["accumulated"] + 1  # it stops there


def test_config_names_its_optimizer():
    with pytest.raises(ValueError, match="optimizer"):
        AccumulationConfig(optimizer="adam")
    assert AccumulationConfig().optimizer == "sgd"


@pytest.mark.parametrize("bug, bites", [("loss_not_divided", False), ("loss_divided_twice", False),
                                        ("zero_grad_every_micro_step", True), ("step_every_micro_step", True)])
def test_under_adamw_a_constant_factor_nearly_cancels_and_the_rest_still_bite(bug, bites):
    record = run_regimes(AccumulationConfig(optimizer="adamw", learning_rate=0.01, num_updates=6, mistake=bug))
    assert not record.grads_allclose  # .grad itself is still wrong
    assert (record.weight_gap > 0.05) is bites, record.weight_gap
    if not bites:
        assert record.weight_gap < 1e-4


def test_adamw_without_bugs_matches_the_big_batch():
    record = run_regimes(AccumulationConfig(optimizer="adamw", learning_rate=0.01, num_updates=4, tail_micro_batches=2))
    assert record.matches_big_batch and record.weight_gap < 1e-5


@pytest.mark.parametrize("learner_state", ["float16", "no_grad"])
def test_the_learners_torch_state_changes_no_verdict_and_is_given_back(learner_state):
    config = AccumulationConfig(accumulation_steps=4, micro_batch_size=8, num_updates=3, tail_micro_batches=2)
    dtype, grad = torch.get_default_dtype(), torch.is_grad_enabled()
    try:
        if learner_state == "float16":
            torch.set_default_dtype(torch.float16)
        else:
            torch.set_grad_enabled(False)
        record = run_regimes(config)
        assert record.grads_allclose and record.matches_big_batch
        assert torch.get_default_dtype() == (torch.float16 if learner_state == "float16" else dtype)
        assert torch.is_grad_enabled() is (learner_state == "float16")
    finally:
        torch.set_default_dtype(dtype)
        torch.set_grad_enabled(grad)
