"""The researcher notebooks show their central computation in a cell (d2l's `#@save` style).

Each such cell holds, verbatim, the source of a package function: a learner edits and re-runs the
cell, the package's sweeps and checks call the same function. Here: the cell's text contains the
function's source (nbval runs the cell itself; nothing here executes notebook code), and the
function is checked on random inputs against an oracle written independently (plain autograd,
torch's own modules, or a second formula).
"""
from __future__ import annotations

import contextlib
import inspect
import json
from pathlib import Path

import pytest
import torch

from widgets.lessons.researcher_2.batchnorm import GhostBatchNorm1d
from widgets.research.adam_rules import malladi_scaled
from widgets.lessons.researcher_2.contrastive import gradient_cache, info_nce, make_encoders, make_pairs
from widgets.lessons.researcher_7.fsdp import sharded_update
from widgets.lessons.researcher_6.invariance import all_reduce_count, per_rank_mean, sum_then_scale
from widgets.lessons.researcher_9.k_schedule import next_k
from widgets.lessons.researcher_8.moe import window_aux_step
from widgets.research.no_sync import accumulate_micro_steps
from widgets.research.noise_scale import window_noise
from widgets.lessons.researcher_7.pipeline import gpipe_two_stages
from widgets.lessons.researcher_8.rl_losses import micro_batch_loss
from widgets.research.saved_bytes import SavedTensorCounter
from widgets.research.tokens import (
    IGNORE_INDEX, TinyCausalLM, accumulate_window, big_batch_token_gradient, make_token_batch, split_window,
)

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
SHOWN = [
    ("researcher_1_why_exact", accumulate_window),
    ("researcher_2_where_it_breaks", GhostBatchNorm1d),
    ("researcher_2_where_it_breaks", gradient_cache),
    ("researcher_3_noise_and_critical_batch", window_noise),
    ("researcher_4_memory_and_time", SavedTensorCounter),
    ("researcher_5_many_machines", accumulate_micro_steps),
    ("researcher_6_across_ranks", per_rank_mean),
    ("researcher_6_across_ranks", all_reduce_count),
    ("researcher_6_across_ranks", sum_then_scale),
    ("researcher_7_shards_and_stages", sharded_update),
    ("researcher_7_shards_and_stages", gpipe_two_stages),
    ("researcher_8_rl_and_moe_losses", micro_batch_loss),
    ("researcher_8_rl_and_moe_losses", window_aux_step),
    ("researcher_9_adam_when_k_changes", malladi_scaled),
    ("researcher_9_adam_when_k_changes", next_k),
]


def code_cells(stem: str) -> list[str]:
    cells = json.loads((NOTEBOOKS / f"{stem}.ipynb").read_text())["cells"]
    return ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]


@pytest.mark.parametrize("stem, function", SHOWN, ids=[f"{s}:{f.__name__}" for s, f in SHOWN])
def test_a_cell_holds_the_package_source(stem, function):
    source = inspect.getsource(function).rstrip("\n")
    holders = [cell for cell in code_cells(stem) if source in cell]
    assert len(holders) == 1, f"{stem}: no code cell (or more than one) holds the source of {function.__name__}"
    assert 5 <= len(source.splitlines()) <= 25, "the shown algorithm should fit on one screen"


# --- the functions themselves, on random inputs, against independent oracles --------------------

def flat(model: torch.nn.Module) -> torch.Tensor:
    return torch.cat([p.grad.reshape(-1) for p in model.parameters()])


@pytest.mark.parametrize("seed", [0, 2, 3])  # seed 1 happens to split into two halves of 105 tokens each
@pytest.mark.parametrize("K", [2, 4])
def test_window_normaliser_is_the_big_batch_and_the_per_micro_batch_mean_is_not(seed, K):
    batch = make_token_batch(16, 24, length_spread=1.0, seed=seed)
    model = TinyCausalLM(seed=seed)
    micro = [(batch.inputs[s], batch.labels[s]) for s in split_window(batch, K)]
    # oracle: one pass, plain cross_entropy mean over the real tokens
    model.zero_grad(set_to_none=True)
    logits = model(batch.inputs)
    big = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), batch.labels.reshape(-1),
                                            ignore_index=IGNORE_INDEX)
    big.backward()
    truth = flat(model).clone()
    model.zero_grad(set_to_none=True)
    logged = accumulate_window(model, micro, "window")
    assert torch.allclose(flat(model), truth, rtol=1e-9, atol=1e-12)
    assert logged == pytest.approx(float(big.detach()), rel=1e-12)
    model.zero_grad(set_to_none=True)
    accumulate_window(model, micro, "per_micro_batch")
    counts = {int((labels != IGNORE_INDEX).sum()) for _, labels in micro}
    assert len(counts) > 1, "the test needs micro-batches with different token counts"
    assert not torch.allclose(flat(model), truth, rtol=1e-7, atol=1e-10)


def test_window_normaliser_with_class_weights_matches_the_package_reference():
    g = torch.Generator().manual_seed(5)
    weights = 0.2 + 2 * torch.rand(12, generator=g, dtype=torch.float64)
    batch = make_token_batch(8, 10, length_spread=0.5, seed=4)
    model = TinyCausalLM(seed=4)
    reference = big_batch_token_gradient(model, batch, weights)
    model.zero_grad(set_to_none=True)
    accumulate_window(model, [(batch.inputs[s], batch.labels[s]) for s in split_window(batch, 4)], "window", weights)
    assert torch.allclose(flat(model), reference.grad, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("ghost_size", [2, 4, 8])
def test_ghost_batch_norm_is_batch_norm_per_group(seed, ghost_size):
    """Oracle: torch's own BatchNorm1d (training mode) run on each group separately."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(16, 5, generator=g, dtype=torch.float64) * 3 + 1
    ghost = GhostBatchNorm1d(5, ghost_size).double()
    with torch.no_grad():
        ghost.weight.copy_(torch.rand(5, generator=g, dtype=torch.float64) + 0.5)
        ghost.bias.copy_(torch.randn(5, generator=g, dtype=torch.float64))
    plain = torch.nn.BatchNorm1d(5).double()
    plain.load_state_dict(ghost.state_dict())
    expected = torch.cat([plain(part) for part in x.split(ghost_size)])
    assert torch.allclose(ghost(x), expected, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("K", [2, 4])
def test_gradient_cache_is_the_full_batch_gradient(seed, K):
    a, b = make_pairs(16, seed=seed)
    encoders = make_encoders(hidden=16, seed=seed)
    encoders.zero_grad(set_to_none=True)
    full = info_nce(encoders["a"](a), encoders["b"](b))
    full.backward()
    truth = flat(encoders).clone()
    encoders.zero_grad(set_to_none=True)
    seen = []
    hook = encoders["a"].register_forward_hook(lambda m, args, out: seen.append(args[0].shape[0]))
    loss = gradient_cache(encoders, a, b, [slice(i, i + 16 // K) for i in range(0, 16, 16 // K)])
    hook.remove()
    assert torch.allclose(flat(encoders), truth, rtol=1e-9, atol=1e-12)
    assert float(loss) == pytest.approx(float(full.detach()), rel=1e-12)
    assert max(seen) == 16 // K and sum(seen) == 32  # no pass larger than a micro-batch; each example twice


@pytest.mark.parametrize("K, b", [(2, 3), (4, 1), (8, 5)])
def test_window_noise_against_a_direct_computation(K, b):
    """Oracle: solve E|G_B|^2 = |G|^2 + tr(Sigma)/B at the two batch sizes, window by window."""
    g = torch.Generator().manual_seed(K * 10 + b)
    grads = torch.randn(6, K, 7, generator=g, dtype=torch.float64) + torch.randn(7, generator=g, dtype=torch.float64)
    grad_sq, trace = window_noise(grads, b)
    for w in range(6):
        small = sum(float(grads[w, k] @ grads[w, k]) for k in range(K)) / K
        mean = grads[w].mean(0)
        big = float(mean @ mean)
        solved = torch.linalg.solve(torch.tensor([[1.0, 1 / b], [1.0, 1 / (K * b)]], dtype=torch.float64),
                                    torch.tensor([small, big], dtype=torch.float64))
        assert float(grad_sq[w]) == pytest.approx(float(solved[0]), rel=1e-9, abs=1e-12)
        assert float(trace[w]) == pytest.approx(float(solved[1]), rel=1e-9, abs=1e-12)


class RecordingDDP(torch.nn.Module):
    """A stand-in for DDP: records, per backward, whether it ran under no_sync."""

    def __init__(self, module: torch.nn.Module):
        super().__init__()
        self.module, self.synced, self._skip = module, [], False

    @contextlib.contextmanager
    def no_sync(self):
        self._skip = True
        try:
            yield
        finally:
            self._skip = False

    def forward(self, x):
        self.synced.append(not self._skip)
        return self.module(x)


@pytest.mark.parametrize("K", [1, 2, 5])
def test_no_sync_placement_syncs_once_per_update_and_keeps_the_gradient(K):
    torch.manual_seed(K)
    module = torch.nn.Linear(3, 1)
    micro = [(torch.randn(4, 3), torch.randn(4, 1)) for _ in range(K)]
    module.zero_grad()
    torch.nn.functional.mse_loss(module(torch.cat([x for x, _ in micro])), torch.cat([y for _, y in micro])).backward()
    truth = flat(module).clone()
    for use_no_sync, expected in ((True, [False] * (K - 1) + [True]), (False, [True] * K)):
        model = RecordingDDP(module)
        module.zero_grad()
        accumulate_micro_steps(model, micro, use_no_sync)
        assert model.synced == expected
        assert torch.allclose(flat(module), truth, rtol=1e-5, atol=1e-7)


def test_no_sync_placement_on_a_real_one_process_ddp_model(tmp_path):
    """DDP itself (gloo, one process): all-reduces counted by a communication hook."""
    dist = torch.distributed
    if not dist.is_available() or not dist.is_gloo_available() or dist.is_initialized():
        pytest.skip("gloo is not available here, or a process group is already running")
    from torch.nn.parallel import DistributedDataParallel
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    try:
        torch.manual_seed(0)
        model = DistributedDataParallel(torch.nn.Linear(3, 1))
        calls = []

        def counting(state, bucket):
            calls.append(1)
            fut = torch.futures.Future()
            fut.set_result(bucket.buffer())
            return fut

        model.register_comm_hook(None, counting)
        micro = [(torch.randn(4, 3), torch.randn(4, 1)) for _ in range(4)]
        accumulate_micro_steps(model, micro, use_no_sync=True)
        assert len(calls) == 1
        accumulate_micro_steps(model, micro, use_no_sync=False)
        assert len(calls) == 1 + 4
    finally:
        dist.destroy_process_group()


def test_saved_tensor_counter_counts_each_saved_storage_once():
    """Oracle: y = (x @ w).exp(), x and w both needing gradients, saves x and w for the matmul and
    exp's output; x.T.T is a view of x's storage, counted once."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(5, 3, generator=g, dtype=torch.float64, requires_grad=True)
    w = torch.nn.Parameter(torch.randn(3, 4, generator=g, dtype=torch.float64))
    model = torch.nn.Module()
    model.w = w
    with SavedTensorCounter(model) as saved:
        out = (x.T.T @ w).exp()
    assert saved.parameter_bytes == w.nbytes
    assert saved.total == x.nbytes + w.nbytes + out.nbytes
    out.sum().backward()  # the hooks leave backward working
    assert torch.allclose(w.grad, x.detach().T @ out.detach())

