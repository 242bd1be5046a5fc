"""What beginner_2's text says holds beyond its cells (issue 36 point 6), and its cells leave the explorer to the learner."""
from pathlib import Path
from statistics import median

import nbformat
import pytest

from widgets.core.config import AccumulationConfig
from widgets.core.training import run_regimes

NOTEBOOK = Path(__file__).resolve().parents[3] / "notebooks" / "beginner_2_watch_a_model_learn.ipynb"


def test_no_cell_moves_the_explorer_and_every_guess_holds_its_answer():
    """The text asks the learner to pick a mistake (a cell that moved the explorer did so two screens away), and the
    cell after each guess box shows nothing until that guess is committed."""
    code = [cell.source for cell in nbformat.read(NOTEBOOK, as_version=4).cells if cell.cell_type == "code"]
    assert not any("explorer.show(" in source for source in code)
    guesses = [(i, source.split(" = make_prediction(")[0].split()[-1]) for i, source in enumerate(code)
               if " = make_prediction(" in source]
    assert len(guesses) == 2
    for i, name in guesses:
        assert f"with {name}.reveal():" in code[i + 1], code[i + 1]


@pytest.fixture(scope="module")
def zero_grad_runs():
    """zero_grad every micro-step on seeds and a micro-batch size the notebook does not show, at both of its rates."""
    return {(K, rate): [run_regimes(AccumulationConfig(accumulation_steps=K, micro_batch_size=8, learning_rate=rate,
                                                       seed=seed, mistake="zero_grad_every_micro_step"))
                        for seed in range(6, 12)]
            for K in (2, 4, 8) for rate in (0.1, 0.316)}


def test_at_the_lessons_rate_the_big_batch_never_climbs_and_at_0316_it_does(zero_grad_runs):
    climbs = {key: sum(max(r.eval_loss["big_batch"]) > r.initial_eval_loss for r in runs)
              for key, runs in zero_grad_runs.items()}
    assert all(n == 0 for (K, rate), n in climbs.items() if rate == 0.1)
    assert sum(n for (K, rate), n in climbs.items() if rate == 0.316) > 0


def test_the_mistake_ends_lower_more_often_at_the_high_rate(zero_grad_runs):
    lower = {rate: sum(r.eval_loss["accumulated"][-1] < r.eval_loss["big_batch"][-1]
                       for (K, at), runs in zero_grad_runs.items() if at == rate for r in runs) for rate in (0.1, 0.316)}
    assert lower[0.316] > 2 * lower[0.1], lower


@pytest.mark.parametrize("K", [2, 4, 8])
def test_the_mistake_pushes_roughly_one_kth_as_hard(zero_grad_runs, K):
    shares = [share for rate in (0.1, 0.316) for r in zero_grad_runs[K, rate] for share in r.grad_scale]
    assert 0.8 / K < median(shares) < 1.6 / K
