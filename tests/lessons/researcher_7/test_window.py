"""The window of pipeline steps: the correct loop against plain autograd on the unsplit model, each mistake's
gradient against its own closed form, the diffs, and the training log."""
import inspect
import json
from pathlib import Path

import pytest
import torch
from matplotlib.figure import Figure

from widgets.lessons.researcher_7.draw import draw_curves
from widgets.lessons.researcher_7.pipeline import make_mlp, split_model
from widgets.lessons.researcher_7.window import (
    WINDOW_MISTAKES, grads_wiped, gradient_ratios, make_windows, scale_every_step, scale_per_stage, train_pipelined,
    window_diff, window_gradient,
)

NOTEBOOK = Path(__file__).resolve().parents[3] / "notebooks" / "researcher_7_shards_and_stages.ipynb"


def run(loop, window, seed=0):
    """(.grad of the whole model after `loop`, per-micro-batch mean-loss gradients by plain autograd, the cut)."""
    model = make_mlp(depth=4, width=8, seed=seed)
    per_micro_batch = []
    for step in window:
        row = []
        for x, y in step:
            model.zero_grad(set_to_none=True)
            torch.nn.functional.mse_loss(model(x), y).backward()
            row.append(torch.cat([p.grad.reshape(-1) for p in model.parameters()]))
        per_micro_batch.append(row)
    model.zero_grad(set_to_none=True)
    stages = split_model(model, 2)
    loop(*stages, window)
    grad = torch.cat([p.grad.reshape(-1) for p in model.parameters()])
    return grad, per_micro_batch, sum(p.numel() for p in stages[0].parameters())


def close(a, b):
    return torch.allclose(a, b, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("K, m", [(1, 1), (2, 3), (4, 4)])
def test_the_window_is_the_mean_over_all_its_micro_batches_and_each_mistake_its_closed_form(K, m):
    window = make_windows(1, K, m, 3, seed=K)[0]
    grad, g, cut = run(window_gradient, window)
    right = sum(x for row in g for x in row) / (K * m)
    assert close(grad, right)
    assert gradient_ratios(window_gradient, window).allclose
    moving = torch.zeros_like(right)
    for row in g:  # the loss / K, then the pile / m after each step
        moving = (moving + sum(row) / K) / m
    assert close(run(scale_every_step, window)[0], moving)
    assert close(run(grads_wiped, window)[0], sum(g[-1]) / (K * m))
    per_stage = run(scale_per_stage, window)[0]
    assert close(per_stage[cut:], right[cut:]) and close(per_stage[:cut], right[:cut] / (K * m))
    if K * m > 1:
        for loop in (scale_every_step, grads_wiped, scale_per_stage):
            assert not gradient_ratios(loop, window).allclose


def test_uneven_micro_batches_are_weighted_by_their_share_of_the_window():
    g = torch.Generator().manual_seed(1)
    window = [[(torch.randn(b, 8, generator=g), torch.randn(b, 8, generator=g)) for b in sizes]
              for sizes in ((3, 1), (2, 2), (4,))]
    model = make_mlp(depth=4, width=8)
    x = torch.cat([x for step in window for x, _ in step])
    y = torch.cat([y for step in window for _, y in step])
    torch.nn.functional.mse_loss(model(x), y).backward()
    truth = torch.cat([p.grad.reshape(-1) for p in model.parameters()])
    assert close(run(window_gradient, window)[0], truth)


def test_the_ratios_read_each_mistake_at_its_size():
    window = make_windows(1, 4, 4, 4)[0]
    assert gradient_ratios(scale_per_stage, window).stage0 == pytest.approx(1 / 16, rel=1e-5)
    assert gradient_ratios(scale_per_stage, window).stage1 == pytest.approx(1, rel=1e-5)
    for loop in (scale_every_step, grads_wiped):
        r = gradient_ratios(loop, window)
        assert 0.2 < r.whole < 0.4 and not r.allclose


def test_each_diff_is_the_whole_loop_with_only_the_mistake_changed():
    body = len(inspect.getsource(window_gradient).splitlines()) - 3  # past the two signature lines and the docstring
    for name, (loop, report) in WINDOW_MISTAKES.items():
        lines = window_diff(loop).splitlines()
        assert sum(line.startswith((" ", "-")) for line in lines) == body, name
        changed = [line for line in lines if line.startswith(("+", "-"))]
        assert 1 <= len(changed) <= 4 and "#" in report, name


def test_training_logs_one_loss_and_norm_per_update_and_the_loss_is_computed_before_the_step():
    windows = make_windows(3, 2, 2, 2)
    log = train_pipelined(window_gradient, windows)
    assert len(log.losses) == len(log.grad_norms) == len(log.stage0_norms) == 3
    assert all(s0 < whole for s0, whole in zip(log.stage0_norms, log.grad_norms))
    for loop, _ in WINDOW_MISTAKES.values():  # same weights and data at update 1: the same logged loss
        assert train_pipelined(loop, windows[:1]).losses[0] == pytest.approx(log.losses[0], rel=1e-6)


def test_bad_sizes_are_named_before_anything_is_allocated():
    with pytest.raises(ValueError, match="accumulation_steps must be a whole number from 1 to 64"):
        make_windows(2, 0, 2, 2)
    with pytest.raises(TypeError, match="updates must be a whole number"):
        make_windows(2.5, 2, 2, 2)
    with pytest.raises(ValueError, match="lr must be a number in"):
        train_pipelined(window_gradient, make_windows(1, 1, 1, 1), lr=0.0)


def test_the_curves_draw_one_line_per_run():
    drawn = draw_curves({"correct": [3.0, 2.0], "wrong": [3.0, 2.5]}, Figure().subplots(), "loss", log=True)
    assert list(drawn) == ["correct", "wrong"] and drawn["correct"].get_linewidth() > drawn["wrong"].get_linewidth()
    assert list(drawn["wrong"].get_xdata()) == [1, 2]


def test_the_notebook_shows_the_correct_loop_once():
    source = inspect.getsource(window_gradient).rstrip("\n")
    cells = ["".join(c["source"]) for c in json.loads(NOTEBOOK.read_text())["cells"] if c["cell_type"] == "code"]
    assert sum(source in cell for cell in cells) == 1
    assert 5 <= len(source.splitlines()) <= 25
