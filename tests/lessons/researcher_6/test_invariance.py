"""The invariance oracle: every division bug fails allclose against one process, every fix passes,
over seeds 0-2 and K in {2, 3, 4}; the truth is torch's own cross_entropy mean, computed apart."""
import inspect
import json
from pathlib import Path

import pytest
import torch

from widgets.lessons.researcher_6.invariance import (
    BUGS, all_reduce_count, count_every_label, count_targets, ddp_gradient, grid, holds, invariance_oracle,
    make_window, one_process_gradient, per_rank_mean, random_window, split_context, split_ranks, sum_then_scale,
    window_and_k,
)
from widgets.research.tokens import TinyCausalLM

SEEDS, KS = (0, 1, 2), (2, 3, 4)
NOTEBOOK = Path(__file__).resolve().parents[3] / "notebooks" / "researcher_6_across_ranks.ipynb"


def _setup(seed):
    return random_window(24, 16, seed=seed), TinyCausalLM(vocab_size=12, seed=seed)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("K", KS)
def test_each_bug_fails_and_each_fix_passes_at_two_ranks(seed, K):
    window, model = _setup(seed)
    truth = one_process_gradient(model, window)
    ranks = split_ranks(window, 2, K)
    assert len({sum(count_targets(labels) for _, labels in rank) for rank in ranks}) == 2, "counts must differ"
    for bug in BUGS:
        wrong = ddp_gradient(model, window, 2, K, bug.loop, bug.count)
        fixed = ddp_gradient(model, window, 2, K, bug.fix, bug.fix_count)
        assert not torch.allclose(wrong, truth, rtol=1e-7, atol=1e-10), bug.name
        assert torch.allclose(fixed, truth, rtol=1e-9, atol=1e-12), bug.name
    assert torch.allclose(ddp_gradient(model, window, 2, K, sum_then_scale), truth, rtol=1e-9, atol=1e-12)


def test_each_bug_has_its_own_size():
    window, model = _setup(0)
    truth = one_process_gradient(model, window)
    for K in KS:
        g = ddp_gradient(model, window, 2, K, window_and_k)
        assert torch.allclose(g, truth / K, rtol=1e-9, atol=1e-12)  # exactly 1/K
    rows, targets = window.num_sequences, count_targets(window.labels)
    over = ddp_gradient(model, window, 2, 4, all_reduce_count, count_every_label)
    assert torch.allclose(over, truth * targets / (targets + rows), rtol=1e-9, atol=1e-12)  # one extra per row
    assert count_every_label(window.labels) == targets + rows
    ignores = next(b for b in BUGS if b.name == "ignores_count")
    g = ddp_gradient(model, window, 2, 4, ignores.loop)
    assert 2.5 < float(g @ truth / (truth @ truth)) < 6  # about K = 4 times too big


@pytest.mark.parametrize("seed", SEEDS)
def test_the_oracle_over_the_grid(seed):
    window, model = _setup(seed)
    for bug in BUGS:
        assert not holds(invariance_oracle(bug.loop, bug.count, window, model)), bug.name
        assert holds(invariance_oracle(bug.fix, bug.fix_count, window, model)), bug.name
    points = invariance_oracle(per_rank_mean, window=window, model=model)
    assert all(p.allclose for p in points if p.world_size == 1)  # one rank: the per-rank mean is the window mean
    assert {(p.world_size, p.accumulation_steps) for p in points} >= {(w, k) for w in (1, 2, 3, 4) for k in KS
                                                                      if 24 % (w * k) == 0}


def test_equal_counts_hide_the_per_rank_bug():
    window = make_window([9] * 8, seed=3)
    model = TinyCausalLM(vocab_size=12, seed=3)
    assert holds(invariance_oracle(per_rank_mean, window=window, model=model))


def test_grid_and_bad_input():
    assert grid(24, (1, 2, 3, 4)) == [(w, k, 24 // (w * k)) for w in (1, 2, 3, 4) for k in (1, 2, 3, 4)
                                      if 24 % (w * k) == 0]
    window = random_window(6, seed=0)
    with pytest.raises(TypeError, match="loop must be a function"):
        invariance_oracle("per_rank_mean", window=window)


def test_the_notebook_shows_the_loops_it_runs():
    cells = ["".join(c["source"]) for c in json.loads(NOTEBOOK.read_text())["cells"] if c["cell_type"] == "code"]
    for function in (per_rank_mean, all_reduce_count, sum_then_scale):
        source = inspect.getsource(function).rstrip("\n")
        assert sum(source in cell for cell in cells) == 1, function.__name__


def test_a_grid_points_cosine_is_the_angle_to_the_truth():
    import math

    import torch

    from widgets.lessons.researcher_6.invariance import GridPoint, compare
    g = torch.tensor([3.0, 4.0, 0.5], dtype=torch.float64)
    truth = torch.tensor([2.0, 5.0, -1.0], dtype=torch.float64)
    point = GridPoint(2, 2, 1, *compare(g, truth))
    assert math.isclose(point.cosine, float(g @ truth / (g.norm() * truth.norm())), rel_tol=1e-12)


@pytest.mark.parametrize("cp", (1, 2, 3, 4))
def test_the_context_slices_share_out_every_target_once(cp):
    window = random_window(8, 16, seed=1)
    rows = split_ranks(window, 1, 2)[0]
    ranks = split_context(rows, cp)
    assert len(ranks) == cp
    for i, (input_ids, labels) in enumerate(rows):
        assert all(torch.equal(rank[i][0], input_ids) for rank in ranks)  # every CP rank reads the whole rows here
        kept = torch.stack([rank[i][1] != -100 for rank in ranks])
        assert torch.equal(kept.sum(0)[:, 1:] > 0, labels[:, 1:] != -100)  # every target, position 0 never one
        assert int(kept.sum(0).max()) <= 1  # and each on one rank only
    assert sum(count_targets(labels) for rank in ranks for _, labels in rank) == count_targets(window.labels)


@pytest.mark.parametrize("cp", (2, 4))
def test_a_slice_local_count_scales_by_one_over_cp_when_one_slice_holds_every_target(cp):
    window = make_window([4] * 4, seed=2, length=17)  # 3 targets per row, all in the first slice of 16 positions
    model = TinyCausalLM(vocab_size=12, seed=2)
    truth = one_process_gradient(model, window)
    assert torch.allclose(ddp_gradient(model, window, 1, 2, per_rank_mean, context_size=cp), truth / cp,
                          rtol=1e-9, atol=1e-12)  # Megatron-LM PR #7513: a half at CP = 2, a quarter at CP = 4
    for fix in (all_reduce_count, sum_then_scale):
        assert torch.allclose(ddp_gradient(model, window, 1, 2, fix, context_size=cp), truth, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("seed", SEEDS)
def test_across_dp_and_cp_the_all_ranks_count_passes_and_the_per_rank_mean_fails(seed):
    window, model = _setup(seed)
    truth = one_process_gradient(model, window)
    for w, k, cp in ((1, 2, 2), (2, 2, 2), (2, 3, 4), (3, 2, 3)):
        for fix in (all_reduce_count, sum_then_scale):
            assert torch.allclose(ddp_gradient(model, window, w, k, fix, context_size=cp), truth, rtol=1e-9, atol=1e-12)
        wrong = ddp_gradient(model, window, w, k, per_rank_mean, context_size=cp)
        assert not torch.allclose(wrong, truth, rtol=1e-7, atol=1e-10), (w, k, cp)


def test_the_oracle_has_a_context_parallel_axis():
    window, model = _setup(0)
    points = invariance_oracle(per_rank_mean, window=window, model=model, context_sizes=(1, 2))
    assert {p.context_size for p in points} == {1, 2} and len(points) == 2 * len(grid(24))
    assert all(p.allclose == (p.world_size == 1 and p.context_size == 1) for p in points)  # one rank: the window mean
    with pytest.raises(ValueError, match=r"context_sizes\[1\]"):
        invariance_oracle(per_rank_mean, window=window, model=model, context_sizes=(2, 16))
    with pytest.raises(ValueError, match="length"):
        make_window([5, 9], length=8)
