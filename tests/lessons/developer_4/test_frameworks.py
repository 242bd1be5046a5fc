"""Accelerate's and Lightning's documented accumulation, run under the loop auditor.

Each test states exactly what the auditor must find, so that a framework upgrade that changes how
the uneven final window is weighted, when the optimizer or the scheduler steps, where clipping
happens or what is logged fails here (then re-execute notebooks/developer_4_frameworks.ipynb).
The expected update ratios are derived, not copied: an update of K equal micro-batches whose
losses are divided by K comes out 1 x the reference; the last one, holding the short last
micro-batch, does not (n/K only when the final window is one micro-batch).
"""
import json
import subprocess
import sys

import pytest

from widgets.audit import audit_training_loop
from widgets.lessons.developer_4.accelerate_adapter import accelerate_items_loop, accelerate_loop
from widgets.lessons.developer_4.frameworks import count_items, framework_versions, loader_of
from widgets.lessons.developer_4.lightning_adapter import lightning_loop

DOCUMENTED = {"accelerate": accelerate_loop, "lightning": lightning_loop}
EXACT = {"accelerate": accelerate_items_loop, "lightning": lambda **kw: lightning_loop(exact=True, **kw)}
# (K, num_batches): the auditor's default 2K + K//2 leaves an uneven final window; 2K does not
CASES = [(3, None), (3, 6), (4, None), (4, 8)]


def _shape(K, num_batches):
    N = 2 * K + K // 2 if num_batches is None else num_batches
    return N, N % K


def _assert_clean(report, K, N):
    """Every count matches the reference, the log was checked, no framework warning leaked out."""
    updates = -(-N // K)
    assert report.counts["backward passes"] == (N, N)
    assert report.counts["optimizer.step()"] == (updates, updates)
    assert report.counts["zero_grad()"] == (updates, updates)
    assert report.log_checked
    assert report.notes == []


@pytest.mark.parametrize("K, num_batches", CASES)
@pytest.mark.parametrize("framework", sorted(DOCUMENTED))
def test_documented_recipe_divides_the_final_window_by_K_and_logs_the_last_micro_batch(framework, K, num_batches):
    report = audit_training_loop(DOCUMENTED[framework](), K, num_batches=num_batches)
    N, tail = _shape(K, num_batches)
    _assert_clean(report, K, N)
    # each micro-batch weighs 1/K: in the final window, short or holding the short last micro-batch, not n_i/n
    assert report.mistakes == {"log_last_micro_batch"} | ({"tail_divided_by_k"} if tail else
                                                          {"normalised_per_micro_batch"})
    full = N // K if tail else N // K - 1  # the updates of K micro-batches of b examples each
    assert report.update_ratios[:full] == pytest.approx([1.0] * full, rel=1e-9)
    assert report.update_ratios[-1] != pytest.approx(1.0, rel=1e-6)


@pytest.mark.parametrize("K, num_batches", CASES)
@pytest.mark.parametrize("framework", sorted(EXACT))
def test_the_exact_recipe_matches_the_reference(framework, K, num_batches):
    report = audit_training_loop(EXACT[framework](), K, num_batches=num_batches)
    N, _ = _shape(K, num_batches)
    _assert_clean(report, K, N)
    assert report.matches_reference, str(report)
    assert report.update_ratios == pytest.approx([1.0] * -(-N // K), rel=1e-9)


@pytest.mark.parametrize("framework", sorted(DOCUMENTED))
def test_scheduler_steps_once_per_update_and_clipping_once_per_update(framework):
    """With a warmup and clipping: one scheduler step per optimizer step, after it; the clipped
    gradient is the reference's at every full update. On this problem every pile exceeds clip_norm, so
    clipping also rescales the under-weighted final window to full size, but not its direction (its
    micro-batches of 5 and 2 examples weigh 1/4 each, not 5/7 and 2/7): the mistake stays named."""
    report = audit_training_loop(DOCUMENTED[framework](clip_norm=1.0), 4, with_scheduler=True, clip_norm=1.0)
    _assert_clean(report, 4, 10)
    assert report.counts["scheduler.step()"] == (3, 3)
    assert report.mistakes == {"log_last_micro_batch", "tail_divided_by_k"}
    assert report.update_ratios[:2] == pytest.approx([1.0, 1.0], rel=1e-6)


@pytest.mark.parametrize("framework", sorted(EXACT))
def test_exact_recipe_with_scheduler_and_clipping_matches_the_reference(framework):
    report = audit_training_loop(EXACT[framework](clip_norm=1.0), 4, with_scheduler=True, clip_norm=1.0)
    _assert_clean(report, 4, 10)
    assert report.counts["scheduler.step()"] == (3, 3)
    assert report.matches_reference, str(report)


def test_a_clip_norm_the_audit_does_not_know_is_named():
    """The adapters really clip: audited without clip_norm, the clipped updates are too small."""
    report = audit_training_loop(accelerate_items_loop(clip_norm=1.0), 4)
    assert not report.matches_reference
    assert all(ratio < 1 for ratio in report.update_ratios)


@pytest.mark.parametrize("framework", sorted(DOCUMENTED))
def test_token_problem_documented_recipe_weighs_tokens_per_micro_batch(framework):
    report = audit_training_loop(DOCUMENTED[framework](), 4, problem="tokens")
    assert report.mistakes == {"log_last_micro_batch", "normalised_per_micro_batch"}


@pytest.mark.parametrize("K, num_batches", CASES)
@pytest.mark.parametrize("framework", sorted(EXACT))
def test_token_problem_window_item_count_matches_the_reference(framework, K, num_batches):
    report = audit_training_loop(EXACT[framework](), K, num_batches=num_batches, problem="tokens")
    assert report.matches_reference, str(report)


def test_lightning_writes_no_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert audit_training_loop(lightning_loop(exact=True), 3).matches_reference
    assert list(tmp_path.iterdir()) == []


def test_importing_the_adapters_leaves_lightning_and_matplotlib_out():
    """Lightning imports torch._dynamo, which imports matplotlib: only a running loop may pull it in."""
    probe = ("import json, sys, widgets.lessons.developer_4.lightning_adapter, widgets.lessons.developer_4.accelerate_adapter; "
             "print(json.dumps(sorted({'pytorch_lightning', 'matplotlib'} & set(sys.modules))))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert json.loads(out) == []


def test_helpers():
    import torch

    assert count_items(torch.zeros(3, 2)) == 6
    assert count_items(torch.tensor([[1, 2, -100], [3, -100, -100]])) == 3
    batches = [(torch.full((2, 3), float(i)), torch.full((2, 1), float(i))) for i in range(3)]
    assert [y[:, 0].tolist() for _, y in loader_of(iter(batches))] == [[0.0, 0.0], [1.0, 1.0], [2.0, 2.0]]
    assert set(framework_versions()) == {"torch", "accelerate", "pytorch-lightning"}


@pytest.mark.parametrize("factory", [accelerate_loop, accelerate_items_loop, lightning_loop])
def test_bad_clip_norm_names_the_parameter(factory):
    with pytest.raises(ValueError, match="clip_norm"):
        factory(clip_norm=-1.0)


def test_bad_exact_names_the_parameter():
    with pytest.raises(TypeError, match="exact"):
        lightning_loop(exact="yes")


# (epoch_batches, num_batches) at K = 4: two epochs of 3 micro-batches, fewer than K; one epoch of 10, a tail of 2
EPOCHS = {"shorter_than_k": (3, 6), "short_tail": (10, 10)}


@pytest.mark.parametrize("framework", sorted(DOCUMENTED))
def test_an_epoch_shorter_than_k_steps_at_each_epoch_end_unwarned(framework):
    """Lightning #21808, Accelerate #1847: each epoch's last batch forces the step, so no update holds K
    micro-batches; each still weighs 1/K. If an upgrade warns or stops stepping there, this fails: re-execute the
    notebook."""
    report = audit_training_loop(DOCUMENTED[framework](epoch_batches=3), 4, num_batches=6)
    assert report.mistakes == {"wrong_step_positions", "tail_divided_by_k", "log_last_micro_batch"}
    assert any("steps after micro-batches [2, 5], the reference after [3, 5]" in f for f in report.findings)
    assert report.counts["optimizer.step()"] == (2, 2)
    assert report.notes == []  # Lightning 2.6.6 does not warn (PR #21811's warning would land here)


@pytest.mark.parametrize("framework", sorted(DOCUMENTED))
def test_an_epochs_short_tail_is_divided_by_k(framework):
    """Lightning #19987: the epoch's last window of 2 micro-batches is applied, each weighing 1/K."""
    report = audit_training_loop(DOCUMENTED[framework](epoch_batches=10), 4, num_batches=10)
    _assert_clean(report, 4, 10)
    assert report.mistakes == {"tail_divided_by_k", "log_last_micro_batch"}
    assert report.update_ratios[:2] == pytest.approx([1.0, 1.0], rel=1e-9)


def test_epochs_read_the_micro_batches_once_each_in_order():
    import torch

    from widgets.lessons.developer_4.frameworks import epochs_of

    batches = [(torch.full((3 if i < 5 else 1, 1), float(i)), torch.zeros(3 if i < 5 else 1, 1)) for i in range(6)]
    loader = loader_of(batches, epoch_batches=2)
    seen = []
    for epoch in range(epochs_of(batches, 2)):
        loader.batch_sampler.sampler.set_epoch(epoch)
        assert len(loader) == 2
        seen += [x[:, 0].tolist() for x, _ in loader]
    assert seen == [[float(i)] * (3 if i < 5 else 1) for i in range(6)]
    with pytest.raises(ValueError, match="epoch_batches must divide the 6"):
        epochs_of(batches, 4)


@pytest.mark.parametrize("factory", [accelerate_loop, lightning_loop])
def test_bad_epoch_batches_names_the_parameter(factory):
    with pytest.raises(ValueError, match="epoch_batches"):
        factory(epoch_batches=0)
