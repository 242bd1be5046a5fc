"""Adam when K changes: the two scaling rules, the seed-rows runs through the lab's loop, AdamW's timescale.

Oracles: the rules against their definitions (half-lives in examples, the first-order agreement),
the seed rows against separate single-seed Adam runs written out with plain autograd, and AdamW's
shrink against (1 - lr weight_decay)^(D/B).
"""
from __future__ import annotations

import inspect
import json
import math
from pathlib import Path

import pytest
import torch

from widgets.lessons.researcher_9.adam_k import (
    RULES, AdamHyper, Regression, RuleRuns, adam_trajectory, adamw_shrink_per_epoch, adamw_tau, compare_rules,
    half_life_examples, make_regression, scale_adam, set_hyper, weight_decay_for_same_tau,
)
from widgets.research.adam_rules import malladi_scaled, same_half_life

NOTEBOOK = Path(__file__).resolve().parents[3] / "notebooks" / "researcher_9_adam_when_k_changes.ipynb"
BASE = AdamHyper(1e-3, 0.9, 0.999, 1e-8)


def test_the_notebook_shows_the_rules_it_runs():
    cells = ["".join(c["source"]) for c in json.loads(NOTEBOOK.read_text())["cells"] if c["cell_type"] == "code"]
    for function in (malladi_scaled, same_half_life):
        source = inspect.getsource(function).rstrip("\n")
        assert sum(source in cell for cell in cells) == 1, function.__name__


@pytest.mark.parametrize("k", [0.5, 2, 4, 8])
def test_scale_adam_runs_the_malladi_rule(k):
    assert scale_adam(BASE, k, "malladi") == AdamHyper(*malladi_scaled(1e-3, 0.9, 0.999, 1e-8, k))


@pytest.mark.parametrize("beta, k", [(0.999, 4), (0.9, 16), (0.95, 0.5)])
def test_half_life_is_kept_in_examples(beta, k):
    assert half_life_examples(same_half_life(beta, k), round(k * 8)) == pytest.approx(half_life_examples(beta, 8))


def test_rules_and_their_limits():
    assert scale_adam(BASE, 4, "unchanged") == BASE
    lr_only = scale_adam(BASE, 4, "lr_only")
    assert (lr_only.lr, lr_only.beta1, lr_only.beta2, lr_only.eps) == (pytest.approx(2e-3), 0.9, 0.999, 1e-8)
    half = scale_adam(BASE, 16, "half_life_betas")
    assert half.beta1 == pytest.approx(0.9**16) and half.eps == pytest.approx(1e-8 / 4)
    with pytest.raises(ValueError, match=r"k must be below 1 / \(1 - beta\) = 10"):
        scale_adam(BASE, 16, "malladi")
    with pytest.raises(ValueError, match="rule must be one of"):
        scale_adam(BASE, 2, "linear")
    with pytest.raises(ValueError, match="k must be"):
        scale_adam(BASE, 0, "lr_only")
    with pytest.raises(ValueError, match="beta1 must be"):
        AdamHyper(1e-3, 1.0, 0.999, 1e-8)
    with pytest.raises(ValueError, match="lr must be"):
        AdamHyper(-1.0, 0.9, 0.999, 1e-8)
    with pytest.raises(ValueError, match="beta must be"):
        half_life_examples(1.0, 4)
    assert set(RULES) == {"unchanged", "lr_only", "malladi", "half_life_betas"}


def test_set_hyper_writes_every_group():
    opt = torch.optim.Adam([torch.nn.Parameter(torch.zeros(1)), ], lr=1.0)
    set_hyper(opt, AdamHyper(0.5, 0.8, 0.9, 1e-6))
    assert opt.param_groups[0]["lr"] == 0.5 and opt.param_groups[0]["betas"] == (0.8, 0.9)
    assert opt.param_groups[0]["eps"] == 1e-6


def _single_seed_adam(problem: Regression, s: int, hyper: AdamHyper, b: int, K: int) -> torch.Tensor:
    """The oracle: one seed, a plain nn.Linear, the loop written out (loss / K, backward, step)."""
    model = torch.nn.Linear(problem.x.shape[2], 1, bias=False)
    with torch.no_grad():
        model.weight.copy_(problem.w0[s])
    opt = torch.optim.Adam(model.parameters(), lr=hyper.lr, betas=(hyper.beta1, hyper.beta2), eps=hyper.eps)
    x, y = problem.x[s], problem.y[s]
    out = []
    n = x.shape[0] // (K * b) * K * b
    for start in range(0, n, K * b):
        for i in range(start, start + K * b, b):
            loss = torch.nn.functional.mse_loss(model(x[i:i + b]).squeeze(1), y[i:i + b])
            (loss / K).backward()
        opt.step()
        opt.zero_grad()
        out.append(model.weight.detach().reshape(-1).clone())
    return torch.stack(out)


@pytest.mark.parametrize("b, K", [(1, 1), (2, 4)])
def test_seed_rows_are_independent_runs(b, K):
    problem = make_regression(dim=3, noise_std=1.0, distance=1.0, examples=64, seeds=3)
    hyper = AdamHyper(0.01, 0.9, 0.99, 1e-8)
    rows = adam_trajectory(problem, hyper, b, K)
    assert rows.shape == (64 // (K * b), 3, 3)
    for s in range(3):
        assert torch.allclose(rows[:, s], _single_seed_adam(problem, s, hyper, b, K), rtol=1e-5, atol=1e-6)


def test_make_regression_is_seeded_and_starts_at_the_distance():
    a, b = make_regression(4, 1.0, 2.5, 32, 2), make_regression(4, 1.0, 2.5, 32, 2)
    assert torch.equal(a.x, b.x) and torch.equal(a.w0, b.w0)
    assert torch.allclose(a.excess_loss(a.w0), torch.full((2,), 6.25))
    assert not torch.equal(a.x[0], a.x[1])
    with pytest.raises(ValueError, match="noise_std must be"):
        make_regression(4, -1.0, 1.0, 32, 2)


def test_compare_rules():
    problem = make_regression(dim=4, noise_std=2.0, distance=1.0, examples=128, seeds=3)
    runs = compare_rules(problem, AdamHyper(0.01, 0.9, 0.99, 1e-8), 1, (2, 16), RULES)
    assert isinstance(runs, RuleRuns)
    assert set(runs.gaps[2]) == set(RULES) and "malladi" not in runs.gaps[16]  # 16 * (1 - 0.9) >= 1
    assert runs.gaps[2]["unchanged"].shape == (3,)
    assert (runs.gaps[2]["lr_only"] < runs.gaps[2]["unchanged"]).all()  # the square-root lr matters most
    with pytest.raises(ValueError, match="multiple of k\\*b"):
        compare_rules(problem, BASE, 1, (3,))
    with pytest.raises(ValueError, match="rules must be"):
        compare_rules(problem, BASE, 1, (2,), ("sgd",))


def test_adamw_tau_and_its_measurement():
    assert adamw_tau(256, 1e-3, 0.1, 1_000_000) == pytest.approx(2.56)
    wd = weight_decay_for_same_tau(256, 1e-3, 0.1, 1024, 2e-3)
    assert wd == pytest.approx(0.2) and adamw_tau(1024, 2e-3, wd, 1_000_000) == pytest.approx(2.56)
    shrink = adamw_shrink_per_epoch(64, 0.01, 0.5, 4096)
    assert shrink == pytest.approx((1 - 0.01 * 0.5) ** 64, rel=1e-12)
    assert shrink == pytest.approx(math.exp(-1 / adamw_tau(64, 0.01, 0.5, 4096)), rel=1e-2)
    with pytest.raises(ValueError, match="dataset_size must be a multiple"):
        adamw_shrink_per_epoch(64, 0.01, 0.5, 100)
    with pytest.raises(ValueError, match="weight_decay must be"):
        adamw_tau(64, 0.01, 0.0, 100)
