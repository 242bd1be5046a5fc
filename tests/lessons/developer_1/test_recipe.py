"""The GPU recipe developer_1 offers to copy (`train_amp` of widgets.core.loops, shown as the notebook's own cell):
the auditor passes it at K = 3 and 4 with a short last window, clipping and a warmup scheduler, on one rank and on
two with DDP's no_sync; and it steps the scheduler only when GradScaler really stepped the optimizer."""
import ast
import inspect
import json
from pathlib import Path

import pytest
import torch

from widgets.audit import audit_training_loop
from widgets.core import loops
from widgets.core.accumulation import make_model

from tests.core.loop_support import mse
from tests.core.loop_support import micro_batches as _micro_batches

NOTEBOOK = Path(__file__).resolve().parents[3] / "notebooks" / "developer_1_proving_equivalence.ipynb"


def _defined_in_the_notebook(name: str) -> list[str]:
    """The source of each top-level `def name` in the notebook's code cells."""
    found = []
    for cell in json.loads(NOTEBOOK.read_text())["cells"]:
        source = "".join(cell["source"])
        if cell["cell_type"] != "code" or f"def {name}(" not in source:
            continue
        for node in ast.parse(source).body:
            if isinstance(node, ast.FunctionDef) and node.name == name:
                found.append(ast.get_source_segment(source, node))
    return found


def test_the_recipe_shown_is_the_function_audited():
    assert _defined_in_the_notebook("train_amp") == [inspect.getsource(loops.train_amp).rstrip("\n")]


@pytest.mark.parametrize("K, num_batches", [(3, 7), (3, 8), (4, 10), (4, 9)])
def test_the_auditor_passes_the_recipe_with_a_short_tail_clipping_and_a_scheduler(K, num_batches):
    assert num_batches % K  # the last window is short
    report = audit_training_loop(loops.train_amp, K, num_batches=num_batches, with_scheduler=True, clip_norm=1.0)
    assert report.matches_reference, report


@pytest.mark.parametrize("K, num_batches", [(3, 7), (4, 10)])
def test_the_auditor_passes_the_no_sync_form_on_two_ranks_with_one_all_reduce_per_update(K, num_batches):
    report = audit_training_loop(loops.train_amp, K, world_size=2, clip_norm=1.0, num_batches=num_batches)
    assert report.matches_reference, report
    assert not any("all-reduce" in note for note in report.notes), report  # no_sync on all but the last


def _enabled_on_cpu(monkeypatch) -> None:
    """The recipe's GradScaler switched on here, as it is on CUDA: `enabled=use_amp` is False on a CPU."""
    real = torch.amp.GradScaler
    monkeypatch.setattr(torch.amp, "GradScaler", lambda device, enabled: real(device, enabled=True,
                                                                               init_scale=2.0**10))


def _run(loop, batches, K=4):
    model = make_model(seed=2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda u: min(1.0, (u + 1) / 4))
    stepped = []
    optimizer.register_step_post_hook(lambda opt, args, kwargs: stepped.append(True))
    logged = loop(model, optimizer, mse, batches, K, scheduler, max_norm=1.0)
    return model, scheduler, len(stepped), logged


def test_with_the_scaler_on_the_recipe_makes_trains_updates(monkeypatch):
    batches = _micro_batches(76, 8)  # 10 micro-batches, the last of 4 examples: windows of 4, 4, 2
    plain, _, _, plain_log = _run(loops.train, batches)
    _enabled_on_cpu(monkeypatch)
    scaled, _, steps, log = _run(loops.train_amp, batches)
    assert steps == 3 and log == pytest.approx(plain_log, rel=1e-6)
    for p, q in zip(plain.parameters(), scaled.parameters()):
        assert torch.allclose(p, q, rtol=1e-6, atol=1e-7)


def test_the_scheduler_waits_when_gradscaler_skips_a_step(monkeypatch):
    batches = _micro_batches(76, 8)
    x, y = batches[5]
    batches[5] = (x, torch.full_like(y, float("inf")))  # window 2's pile holds an inf: GradScaler skips its step
    _enabled_on_cpu(monkeypatch)
    model, scheduler, steps, log = _run(loops.train_amp, batches)
    assert steps == 2  # windows 1 and 3 stepped the optimizer, window 2 did not
    assert scheduler.last_epoch == 2  # and the schedule counted those two updates only
    assert all(torch.isfinite(p).all() for p in model.parameters())
    assert not torch.isfinite(torch.tensor(log[1])) and len(log) == 3
