"""researcher_3's many-seed critical-batch experiment (widgets.lessons.researcher_3.critical_race): the batched
race is a plain torch.optim loop run by run, the exact noise scales and Hessian meet autograd, and the
notebook's sweep keeps every best learning rate inside its grid."""
import math
import statistics

import pytest
import torch

from widgets.lessons.researcher_3.critical_batch import fit_tradeoff, make_classifier, make_teacher_problem, noise_scales_at
from widgets.lessons.researcher_3 import critical_race
from widgets.lessons.researcher_3.critical_race import Run, model_at_target, race_to_target, sweep_effective_batch
from widgets.research.noise_scale import exact_noise_scales

SMALL = make_teacher_problem(256, seed=1)


def _perturbed(seed: int = 0, scale: float = 0.3) -> torch.nn.Module:
    model = make_classifier(seed)
    g = torch.Generator().manual_seed(seed + 7)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(scale * torch.randn(p.shape, generator=g))
    return model


# --- the race is a plain loop, many runs at once ----------------------------------------------------

def one_run(problem, b, k, lr, target, optimizer="sgd", max_updates=60, seed=0):
    """Oracle: one run as anyone writes it (torch.optim, nn.Linear), the micro-batches drawn as the
    race draws them, the loss's crossing of the target interpolated between the two updates around it."""
    model = make_classifier(seed)
    opt = (torch.optim.SGD if optimizer == "sgd" else torch.optim.Adam)(model.parameters(), lr=lr)
    g = torch.Generator().manual_seed(seed + 1)
    first = previous = None
    for update in range(max_updates):
        with torch.no_grad():
            loss = float(torch.nn.functional.cross_entropy(model(problem.x), problem.y))
        if loss <= target:
            return 0.0 if update == 0 else update - 1 + (previous - target) / (previous - loss)
        first = loss if first is None else first
        if not math.isfinite(loss) or loss > 2 * first:
            return None
        previous = loss
        for _ in range(k):
            idx = torch.randint(0, problem.x.shape[0], (b,), generator=g)
            (torch.nn.functional.cross_entropy(model(problem.x[idx]), problem.y[idx]) / k).backward()
        opt.step()
        opt.zero_grad()
    return None


def same_steps(raced, alone):
    return (raced is None and alone is None) or (raced is not None and alone == pytest.approx(raced, abs=1e-3))


@pytest.mark.parametrize("k", [1, 3])
def test_race_takes_the_steps_of_single_runs_sgd(k, monkeypatch):
    monkeypatch.setattr(critical_race, "GIVE_UP", 100.0)  # no run is stopped for being slow
    rates = [0.1, 0.5, 2.0, 40.0]  # the last diverges
    runs = [Run(0, s, lr) for s in (0, 2) for lr in rates]
    raced = race_to_target([SMALL], 4, k, runs, 1.0, max_updates=60)
    for run, (steps, outcome) in zip(runs, raced):
        assert same_steps(steps, one_run(SMALL, 4, k, run.learning_rate, 1.0, seed=run.seed)), (run, steps)
        assert (outcome == "reached") == (steps is not None)
    assert raced[3][1] == "diverged"


def test_steps_are_interpolated_not_whole_updates():
    raced = race_to_target([SMALL], 4, 2, [Run(0, s, 0.5) for s in range(4)], 1.0, max_updates=60)
    steps = [s for s, _ in raced]
    assert all(s is not None for s in steps) and any(s != int(s) for s in steps)
    assert race_to_target([SMALL], 4, 2, [Run(0, 0, 0.5)], 100.0) == [(0.0, "reached")]  # reached before any update


def test_race_adam_is_torch_adam_and_runs_do_not_mix(monkeypatch):
    monkeypatch.setattr(critical_race, "GIVE_UP", 100.0)
    runs = [Run(0, 0, 0.01), Run(0, 0, 0.03), Run(0, 1, 0.02)]
    raced = race_to_target([SMALL], 4, 2, runs, 1.0, "adam", max_updates=80)
    for run, (steps, _) in zip(runs, raced):
        assert same_steps(steps, one_run(SMALL, 4, 2, run.learning_rate, 1.0, "adam", 80, run.seed))
    alone = race_to_target([SMALL], 4, 2, runs[1:2], 1.0, "adam", max_updates=80)
    assert alone[0] == raced[1]


def test_race_over_two_problems_and_giving_up():
    other = make_teacher_problem(256, seed=2)
    runs = [Run(0, 0, 0.5), Run(1, 0, 0.5), Run(1, 0, 0.01)]
    raced = race_to_target([SMALL, other], 4, 2, runs, 1.0, max_updates=200)
    assert same_steps(raced[0][0], one_run(SMALL, 4, 2, 0.5, 1.0, max_updates=200))
    assert same_steps(raced[1][0], one_run(other, 4, 2, 0.5, 1.0, max_updates=200))
    # the tiny rate is stopped at twice the steps of the fastest run of its problem and seed
    assert raced[2] == (None, "slow")


def test_race_bad_input_names_the_parameter():
    with pytest.raises(ValueError, match="runs"):
        race_to_target([SMALL], 4, 1, [Run(1, 0, 0.1)], 1.0)
    with pytest.raises(ValueError, match="optimizer"):
        race_to_target([SMALL], 4, 1, [Run(0, 0, 0.1)], 1.0, "lamb")
    with pytest.raises(ValueError, match="problems"):
        race_to_target([SMALL, make_teacher_problem(128)], 4, 1, [Run(0, 0, 0.1)], 1.0)
    with pytest.raises(ValueError, match="learning_rate"):
        race_to_target([SMALL], 4, 1, [Run(0, 0, -1.0)], 1.0)
    with pytest.raises(ValueError, match=r"betas must be two numbers in \[0, 1\)"):
        race_to_target([SMALL], 4, 1, [Run(0, 0, 0.1, (0.9, 1.0))], 1.0, "adam")


# --- exact noise scales ---------------------------------------------------------------------------

def test_exact_noise_scales_are_those_of_each_example_gradient_and_the_hessian():
    model = _perturbed(1).double()
    grads = []
    for i in range(len(SMALL.y)):  # each example's gradient, one backward each
        model.zero_grad()
        torch.nn.functional.cross_entropy(model(SMALL.x[i:i + 1].double()), SMALL.y[i:i + 1]).backward()
        grads.append(torch.cat([p.grad.reshape(-1) for p in model.parameters()]))
    hessian = torch.zeros(len(grads[0]), len(grads[0]), dtype=torch.float64)
    model.zero_grad()
    loss = torch.nn.functional.cross_entropy(model(SMALL.x.double()), SMALL.y)
    gradient = torch.cat([g.reshape(-1) for g in torch.autograd.grad(loss, list(model.parameters()), create_graph=True)])
    for row in range(len(gradient)):  # the Hessian row by row, from the gradient's gradient
        hessian[row] = torch.cat([g.reshape(-1) for g in torch.autograd.grad(gradient[row], list(model.parameters()),
                                                                               retain_graph=True)])
    expected, got = exact_noise_scales(torch.stack(grads), hessian), noise_scales_at(SMALL, model)
    for name in ("b_simple", "b_noise", "grad_sq", "trace_sigma", "curvature", "trace_h_sigma", "sharpness"):
        assert getattr(got, name) == pytest.approx(getattr(expected, name), rel=1e-9), name


def one_run_loss(updates):
    """The full-data loss of one_run(SMALL, 4, 2, 0.5) after `updates` updates."""
    model = make_classifier(0)
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    g = torch.Generator().manual_seed(1)
    for _ in range(updates):
        for _ in range(2):
            idx = torch.randint(0, SMALL.x.shape[0], (4,), generator=g)
            (torch.nn.functional.cross_entropy(model(SMALL.x[idx]), SMALL.y[idx]) / 2).backward()
        opt.step()
        opt.zero_grad()
    with torch.no_grad():
        return float(torch.nn.functional.cross_entropy(model(SMALL.x), SMALL.y))


def test_noise_scales_at_and_model_at_target():
    model = model_at_target(SMALL, 4, 2, 0.5, 1.0, max_updates=100)
    with torch.no_grad():
        assert float(torch.nn.functional.cross_entropy(model(SMALL.x), SMALL.y)) <= 1.0
    (steps, _), = race_to_target([SMALL], 4, 2, [Run(0, 0, 0.5)], 1.0, max_updates=100)
    assert one_run_loss(math.ceil(steps) - 1) > 1.0  # the update the race stopped at: one earlier was still above
    scales = noise_scales_at(SMALL, model)
    assert scales.b_simple > 0 and scales.sharpness > 0 and math.isfinite(scales.b_noise)
    with pytest.raises(ValueError, match="learning_rate"):
        model_at_target(SMALL, 4, 2, 1e-6, 0.1, max_updates=3)


# --- the linear rule -----------------------------------------------------------------------------

def test_linear_rule_reads_the_grid():
    grid = [2 ** (i / 2) for i in range(-4, 5)]
    sweep = sweep_effective_batch(SMALL, 4, [1, 2], {"sgd": grid}, 1.0, max_updates=80)
    assert sweep.replicates == [(1, 0)]
    (lr0, steps0) = sweep.best(1, 0)[4]
    rule = sweep.linear_rule(1, 0)
    assert rule[4] == (lr0, steps0, "reached")
    doubled = [g for g in grid if math.isclose(g, 2 * lr0)]
    assert rule[8][0] == pytest.approx(2 * lr0)
    assert rule[8][1:] == (sweep.runs[(1, 0, 8, doubled[0])] if doubled else (None, "off the grid"))


# --- the notebook's sweep -------------------------------------------------------------------------

@pytest.fixture(scope="module")
def notebook_sweep():
    """researcher_3's sweep, as its cell calls it: 3 problems x 3 run seeds x 6 batches x 15 rates."""
    problems = [make_teacher_problem(1024, seed=s) for s in (0, 1, 2)]
    grid = [2 ** (i / 2) for i in range(-7, 8)]
    return sweep_effective_batch(problems, micro_batch_size=4, accumulation_steps=[1, 2, 4, 8, 16, 32],
                                 learning_rates={"sgd": grid}, target_loss=0.85, max_updates=150, seeds=(0, 1, 2))


def test_no_best_learning_rate_sits_at_a_grid_edge(notebook_sweep):
    sweep = notebook_sweep
    assert len(sweep.problems) >= 3 and len(sweep.seeds) >= 3
    for p, s in sweep.replicates:
        for B in sweep.effective_batches:
            tied = sweep.tied_best(p, s, B)
            assert tied, f"replicate {(p, s)} never reached the target at K·b = {B}"
            assert sweep.learning_rates[0] not in tied and sweep.learning_rates[-1] not in tied, (p, s, B, tied)
    assert sweep.best_at_edge() == []


def test_every_replicate_fits_the_tradeoff(notebook_sweep):
    sweep = notebook_sweep
    crit = []
    for rep in sweep.replicates:
        best = sweep.best(*rep)
        crit.append(fit_tradeoff(list(best), [v[1] for v in best.values()]).b_crit)
    assert len(crit) == 9 and min(crit) > 4 and statistics.median(crit) < 128  # inside the measured batches


def test_the_adam_base_grid_holds_its_optimum():
    problems = [make_teacher_problem(1024, seed=s) for s in (0, 1, 2)]
    adam = sweep_effective_batch(problems, 4, [1], {"adam": [0.01 * 2 ** (i / 2) for i in range(-4, 7)]}, 0.85,
                                 max_updates=150, seeds=(0, 1, 2))
    assert adam.best_at_edge() == []
