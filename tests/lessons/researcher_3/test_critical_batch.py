"""The accumulation loop's windows feed the estimator; the trade-off fit recovers known curves."""
import pytest
import torch

from widgets.lessons.researcher_3.critical_batch import (
    Tradeoff, fit_tradeoff, make_classifier, make_teacher_problem, same_update_any_split,
    train_with_noise_scale,
)
from widgets.lessons.researcher_3.critical_race import Run, race_to_target, sweep_effective_batch

PROBLEM = make_teacher_problem(512)


def test_micro_gradients_read_from_the_pile_are_the_micro_batch_gradients():
    record = train_with_noise_scale(PROBLEM, micro_batch_size=4, accumulation_steps=3, num_updates=2)
    assert len(record.losses) == len(record.per_window) == len(record.smoothed) == 2
    assert all(t > 0 for t in record.trace_sigma)


def test_the_window_uses_independent_micro_batches_at_fixed_parameters():
    # the first window, rebuilt by hand: three micro-batches drawn as the loop draws them
    record = train_with_noise_scale(PROBLEM, micro_batch_size=4, accumulation_steps=3, num_updates=1)
    model = make_classifier(0)
    g = torch.Generator().manual_seed(1)
    grads = []
    for _ in range(3):
        idx = torch.randint(0, 512, (4,), generator=g)
        model.zero_grad()
        torch.nn.functional.cross_entropy(model(PROBLEM.x[idx]), PROBLEM.y[idx]).backward()
        grads.append(torch.cat([p.grad.reshape(-1) for p in model.parameters()]))
    from widgets.research.noise_scale import estimate_noise_scale
    expected = estimate_noise_scale(torch.stack(grads), 4)
    assert record.grad_sq[0] == pytest.approx(expected.grad_sq, rel=1e-4)
    assert record.trace_sigma[0] == pytest.approx(expected.trace_sigma, rel=1e-4)


def test_fit_recovers_a_known_tradeoff():
    truth = Tradeoff(s_min=20.0, e_min=640.0)
    batches = [4, 8, 16, 32, 64, 128]
    fit = fit_tradeoff(batches, [truth.steps(B) for B in batches])
    assert fit.s_min == pytest.approx(20.0) and fit.e_min == pytest.approx(640.0)
    assert fit.b_crit == pytest.approx(32.0)
    # the hyperbola (S/S_min - 1)(E/E_min - 1) = 1 holds at every B
    for B in batches:
        assert (fit.steps(B) / fit.s_min - 1) * (fit.examples(B) / fit.e_min - 1) == pytest.approx(1.0)


def test_fit_refuses_points_off_the_curve():
    with pytest.raises(ValueError, match="S_min"):
        fit_tradeoff([1, 2, 4], [1.0, 5.0, 20.0])
    with pytest.raises(ValueError, match="same length"):
        fit_tradeoff([1, 2], [1.0])


def test_race_to_target_and_sweep():
    assert race_to_target(PROBLEM, 8, 1, [Run(0, 0, 0.5)], target_loss=100.0) == [(0.0, "reached")]
    assert race_to_target(PROBLEM, 8, 1, [Run(0, 0, 0.5)], target_loss=1e-6, max_updates=3) == [(None, "stalled")]
    sweep = sweep_effective_batch(PROBLEM, 8, [1, 2], {"sgd": [0.5, 1.0]}, target_loss=1.2, max_updates=60)
    assert sweep.effective_batches == (8, 16) and sweep.replicates == [(0, 0)]
    best = sweep.best(0, 0)
    assert set(best) == {8, 16}
    for B, (lr, steps) in best.items():  # the sweep's runs are race_to_target's runs, one at a time too
        assert race_to_target(PROBLEM, 8, B // 8, [Run(0, 0, lr)], 1.2, max_updates=60) == [(steps, "reached")]


def test_trading_b_for_k_changes_nothing():
    weights = same_update_any_split(PROBLEM, 32, [1, 4, 32], num_updates=3)
    assert torch.allclose(weights[1], weights[32], atol=1e-6) and torch.allclose(weights[4], weights[32], atol=1e-6)


def test_bad_input_names_the_parameter():
    with pytest.raises(ValueError, match="accumulation_steps"):
        train_with_noise_scale(PROBLEM, accumulation_steps=1)
    with pytest.raises(TypeError, match="problem"):
        train_with_noise_scale("data")
    with pytest.raises(ValueError, match="optimizer"):
        race_to_target(PROBLEM, 8, 1, [Run(0, 0, 0.5)], 1.0, optimizer="lamb")
    with pytest.raises(ValueError, match="micro_batch_sizes"):
        same_update_any_split(PROBLEM, 32, [3])
    with pytest.raises(ValueError, match="micro_batch_size"):
        sweep_effective_batch(PROBLEM, 0, [1], {"sgd": [0.1]}, 1.0)


def test_sizes_past_the_ceiling_are_refused_before_allocating(before_allocating, monkeypatch):
    from widgets.core.config import BudgetError
    with before_allocating(), pytest.raises(BudgetError, match=r"train_with_noise_scale\(micro_batch_size=8, "
                                            r"accumulation_steps=1024, num_updates=100000\) on 512 examples would run "
                                            r"about 206\d{3} s, over this lab's limit of 300 s"):
        train_with_noise_scale(PROBLEM, 8, 1024, 100_000)
    with before_allocating(), pytest.raises(ValueError, match=r"micro_batch_size must be a whole number from 1 to 512"):
        race_to_target(PROBLEM, 10**9, 1, [Run(0, 0, 0.1)], 0.5)
    with before_allocating(), pytest.raises(BudgetError, match=r"race_to_target of 1 runs \(accumulation_steps=1024, "
                                            r"max_updates=100000\) on 512 examples would need about 390\.6 GB"):
        race_to_target(PROBLEM, 512, 1024, [Run(0, 0, 0.1)], 0.5, max_updates=100_000)
    with before_allocating(), pytest.raises(BudgetError, match=r"sweep_effective_batch of 60 runs of up to 10000 "
                                            r"updates would run about \d+ s, over this lab's limit of 300 s"):
        sweep_effective_batch(PROBLEM, 4, [1, 2, 4, 8, 16, 32], {"sgd": [0.1] * 10}, 0.5, max_updates=10_000)
    with before_allocating(), pytest.raises(BudgetError, match=r"same_update_any_split\(effective_batch_size=1024, "
                                            r"micro_batch_sizes=\[1\], num_updates=1000\) would run about 2050 s"):
        same_update_any_split(PROBLEM, 1024, [1], num_updates=1000)
    monkeypatch.setenv("LAB_MEMORY_LIMIT_MB", "100")  # the largest problem (192 MB) fits the default ceiling only
    with before_allocating(), pytest.raises(BudgetError, match=r"make_teacher_problem\(num_examples=1000000\) would need "
                                            r"about 192 MB, over this lab's limit of 100 MB"):
        make_teacher_problem(1_000_000)


def test_notebook_sizes_pass_the_ceiling(before_allocating, monkeypatch):
    """researcher_3's calls, checked without training: the races are replaced by a stub."""
    from widgets.lessons.researcher_3 import critical_batch, critical_race
    problem = make_teacher_problem(1024, seed=0)
    record = train_with_noise_scale(problem, micro_batch_size=8, accumulation_steps=8, num_updates=2)
    assert len(record.losses) == 2
    assert critical_batch.training_estimate(1024, 8, 8, 150)[1] < 10  # the notebook's 150 updates: ~3 s estimated
    problems = [make_teacher_problem(1024, seed=s) for s in (0, 1, 2)]
    monkeypatch.setattr(critical_race, "race_to_target", lambda problems, b, k, runs, *a, **kw: [(1, "reached")] * len(runs))
    grid = [2 ** (i / 2) for i in range(-7, 8)]
    sweep = sweep_effective_batch(problems, micro_batch_size=4, accumulation_steps=[1, 2, 4, 8, 16, 32],
                                  learning_rates={"sgd": grid}, target_loss=0.85, max_updates=150, seeds=(0, 1, 2))
    assert len(sweep.runs) == 3 * 3 * 6 * 15
    # the real races: their high estimates fit the ceilings (one race per K, 135 runs of 150 updates)
    for k in (1, 2, 4, 8, 16, 32):
        memory, seconds = critical_race.race_estimate(1024, 4, k, 150, 135)
        assert memory < 200 * 2**20 and seconds < 100
