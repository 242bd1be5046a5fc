"""Paper formulas, the peak they estimate, and the (b, K) planner."""
import pytest
import torch

from widgets.research.planner import FLOAT32, PRESETS, Precision, TransformerShape, activation_bytes_per_layer
from widgets.research.planner import PlannerModel, best_plan, transformer_memory


def test_formula_is_korthikanti_at_16_bit():
    s, b, h, a = 2048, 1, 4096, 32
    assert activation_bytes_per_layer(s, b, h, a) == s * b * h * (34 + 5 * a * s / h)
    assert activation_bytes_per_layer(s, b, h, a, recompute=True) == 2 * s * b * h


def test_without_dropout_no_masks_and_no_dropped_copy():
    s, b, h, a = 64, 2, 32, 4
    assert activation_bytes_per_layer(s, b, h, a, element_bytes=4, mask_bytes=0) == s * b * h * 64 + a * s * s * b * 4


def test_presets_have_their_sizes():
    assert PRESETS["GPT-2 small"].parameters == pytest.approx(124e6, rel=0.01)
    assert PRESETS["1B"].parameters == pytest.approx(1.3e9, rel=0.1)
    assert PRESETS["7B"].parameters == pytest.approx(6.7e9, rel=0.05)


def test_mixed_precision_adam_is_16_bytes_per_parameter():
    m = transformer_memory(PRESETS["7B"], 1)
    assert m.fixed == 16 * PRESETS["7B"].parameters
    assert transformer_memory(PRESETS["7B"], 4).activations == 4 * m.activations
    assert transformer_memory(PRESETS["7B"], 4, recompute=True).activations < m.activations


def test_float32_adam_is_16_bytes_per_parameter_too():
    m = transformer_memory(PRESETS["GPT-2 small"], 1, precision=FLOAT32)
    assert (m.weights, m.gradients, m.optimizer_state) == tuple(n * PRESETS["GPT-2 small"].parameters for n in (4, 4, 8))


def test_planner_lists_divisors_and_marks_what_fits():
    model = PlannerModel("m", 1000, 100.0, 10.0, overhead_s=1.0, per_example_s=1.0)
    plans = model.plans(1500, 8)
    assert [(p.micro_batch_size, p.accumulation_steps) for p in plans] == [(1, 8), (2, 4), (4, 2), (8, 1)]
    assert [p.fits for p in plans] == [True, True, True, False]
    assert plans[0].seconds_per_update == 8 * 2.0
    assert best_plan(plans).micro_batch_size == 4
    assert best_plan(PlannerModel("m", 1000, 1000.0, 10.0).plans(1001, 4)) is None
    with pytest.raises(ValueError, match="memory_budget"):
        model.plans(1000, 8)


def test_bad_shapes():
    with pytest.raises(TypeError, match="shape"):
        transformer_memory("7B", 1)
    with pytest.raises(TypeError, match="precision"):
        transformer_memory(PRESETS["7B"], 1, precision="bf16")
    with pytest.raises(ValueError, match="seq_len"):
        activation_bytes_per_layer(0, 1, 8, 2)


def test_zero_stages_shard_optimizer_then_grads_then_weights():
    from widgets.research.planner import zero_bytes_per_rank
    p, n = 1000, 8
    totals = [zero_bytes_per_rank(p, stage, n) for stage in range(4)]
    assert totals[0] == {"weights": 2 * p, "grads": 2 * p, "optimizer": 12 * p, "total": 16 * p}
    assert totals[1] == {"weights": 2 * p, "grads": 2 * p, "optimizer": 12 * p // n, "total": 4 * p + 12 * p // n}
    assert totals[2]["grads"] == 2 * p // n and totals[2]["weights"] == 2 * p
    assert totals[3]["total"] == 16 * p // n
    assert zero_bytes_per_rank(p, 3, 1)["total"] == 16 * p  # one rank: nothing to shard over
    assert zero_bytes_per_rank(p, 0, n, grad_bytes=4)["total"] == 18 * p  # fp32 gradient accumulator
    assert zero_bytes_per_rank(1001, 3, n)["weights"] == 2 * 126  # shards padded to ceil(P / N)


def test_no_sync_keeps_the_whole_gradient_on_each_rank():
    from widgets.research.planner import zero_bytes_per_rank
    # meta-pytorch/tnt PR #1057: 26B parameters on 16 ranks, bf16 gradients 3.25 GB sharded, ~52 GB unsharded
    assert zero_bytes_per_rank(26_000_000_000, 3, 16)["grads"] == 3_250_000_000
    assert zero_bytes_per_rank(26_000_000_000, 3, 16, no_sync=True)["grads"] == 52_000_000_000
    assert zero_bytes_per_rank(1000, 3, 8, grad_bytes=4, no_sync=True)["grads"] == 4000
    assert zero_bytes_per_rank(1000, 0, 8, no_sync=True) == zero_bytes_per_rank(1000, 0, 8)  # DDP: already whole


@pytest.mark.parametrize("kwargs, error, words", [
    (dict(stage=4), ValueError, "stage must be a whole number from 0 to 3"),
    (dict(stage=-1), ValueError, "stage"),
    (dict(world_size=0), ValueError, "world_size"),
    (dict(parameters=0), ValueError, "parameters"),
    (dict(parameters=1.5e9), TypeError, "parameters"),
    (dict(grad_bytes=0), ValueError, "grad_bytes"),
    (dict(no_sync="yes"), TypeError, "no_sync"),
])
def test_zero_bad_input_names_the_parameter(kwargs, error, words):
    from widgets.research.planner import zero_bytes_per_rank
    args = dict(parameters=1000, stage=1, world_size=8)
    with pytest.raises(error, match=words):
        zero_bytes_per_rank(**{**args, **kwargs})


def test_the_peak_counts_the_loss_the_layer_backward_and_the_embedding():
    shape = PRESETS["7B"]
    s, b, h, V = 4096, 32, 4096, 32000
    m = transformer_memory(shape, b, recompute=True)
    assert m.loss_working == s * b * V * (2 + 3 * 4)  # bf16 logits kept, fp32 log-softmax and its two gradients
    assert m.layer_working == m.recomputed_layer == activation_bytes_per_layer(s, b, h, 32)  # one layer, in full
    assert m.embedding_gradient == V * h * 2
    assert m.activations == 32 * 2 * s * b * h + 2 * s * b * h * 2  # kept layer inputs and the last LayerNorm's
    moments = m.moments()
    assert moments["the loss's backward"] == m.activations + m.loss_working
    assert moments["a layer's backward"] == m.activations + 2 * m.layer_working + m.embedding_gradient
    assert m.peak == m.fixed + max(moments.values())
    assert m.peak - m.paper_total > 100e9  # the working sets: over 100 GB the paper's four terms leave out
    assert transformer_memory(shape, 1).recomputed_layer == 0  # no checkpointing, nothing rebuilt
    assert transformer_memory(shape, 1, precision=Precision(grads=4)).fixed == 18 * shape.parameters
    lean = transformer_memory(shape, b, recompute=True, precision=Precision(logits_kept=False))
    assert m.loss_working - lean.loss_working == s * b * V * 2


def test_sdpa_drops_the_quadratic_term_only():
    s, b, h, a = 2048, 2, 1024, 16
    plain, fused = activation_bytes_per_layer(s, b, h, a), activation_bytes_per_layer(s, b, h, a, sdpa=True)
    assert plain - fused == 5 * a * s * s * b and fused == 34 * s * b * h
    assert activation_bytes_per_layer(s, b, h, a, recompute=True, sdpa=True) == 2 * s * b * h
    assert transformer_memory(PRESETS["7B"], 2, sdpa=True).layer_working == 34 * 4096 * 2 * 4096


def test_planner_model_adds_the_terms_and_shards_the_fixed_bytes():
    from widgets.research.planner import Sharding, paper_planner_model, zero_bytes_per_rank
    model = paper_planner_model(PRESETS["7B"], sdpa=True)
    plans = {p.micro_batch_size: p for p in model.plans(round(141e9), 64, recompute=True)}
    assert plans[32].memory_bytes == transformer_memory(PRESETS["7B"], 32, recompute=True, sdpa=True).peak
    assert best_plan(list(plans.values())).micro_batch_size == 8
    p = PRESETS["7B"].parameters
    for sharding in (Sharding(3, 8), Sharding(2, 8, 4, True)):
        expected = zero_bytes_per_rank(p, sharding.stage, sharding.world_size, sharding.grad_bytes, sharding.no_sync)
        assert model.fixed(sharding) == expected["total"]
    assert model.fixed() == model.fixed(Sharding()) == 16 * p
    fsdp = {q.micro_batch_size: q for q in model.plans(round(141e9), 64, recompute=True, sharding=Sharding(3, 8))}
    assert fsdp[32].fits and not plans[32].fits and fsdp[32].memory_bytes == plans[32].memory_bytes - 16 * p + zero_bytes_per_rank(p, 3, 8)["total"]


def test_measured_models():
    from widgets.research.planner import Sharding
    measured = PlannerModel("tiny", 1000, 10.0, 1.0)
    with pytest.raises(ValueError, match="sharding needs the parameter count"):
        measured.plans(5000, 8, sharding=Sharding(1, 2))
    assert measured.working(4, True) == 4.0 and measured.working(4, False) == 40.0  # activations only


# --- the estimate against the CPU allocator's peak -------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("shape, b, checkpointing, sdpa, moment", [
    ((2, 64, 4, 64, 128), 8, False, False, "a layer's backward"),   # a small vocabulary: the layers set the peak
    ((2, 64, 4, 64, 128), 8, True, False, "a layer's backward"),    # ... the rebuilt layer on top
    ((2, 64, 4, 64, 128), 8, True, True, "a layer's backward"),
    ((2, 32, 2, 64, 4096), 2, False, False, "the loss's backward"),  # a large vocabulary: the loss does
    ((2, 32, 2, 64, 4096), 2, True, True, "the loss's backward"),
    ((1, 64, 2, 8, 4096), 1, False, False, "the embedding's gradient"),  # few tokens: the tied embedding does
])
def test_the_estimate_holds_the_allocators_peak_within_one_layer(shape, b, checkpointing, sdpa, moment):
    from widgets.research.memory import TinyGPT, language_model_batch, lm_loss
    from widgets.research.saved_bytes import allocator_peak
    layers, hidden, heads, seq_len, vocab = shape
    model = TinyGPT(layers=layers, hidden=hidden, heads=heads, seq_len=seq_len, vocab=vocab, dropout=0.0, sdpa=sdpa)
    model.checkpoint_blocks = checkpointing
    tokens, targets = language_model_batch(model, b)
    for p in model.parameters():  # inside the window: the gradient buffer is there
        p.grad = torch.zeros_like(p)
    measured = allocator_peak(lambda: lm_loss(model, tokens, targets).backward())
    paper = transformer_memory(TransformerShape("tiny", *shape), b, checkpointing, sdpa, FLOAT32)
    predicted = paper.peak - paper.fixed
    assert max(paper.moments(), key=paper.moments().get) == moment
    # below the allocator by less than one s x b x h tensor (its small extras: the loss's targets, LayerNorm
    # statistics), above it by at most the layer gradients' upper estimate (one layer, where backward needs half)
    one_sbh = seq_len * b * hidden * 4
    assert measured - one_sbh < predicted <= measured + paper.layer_working, (measured, predicted)


def test_the_committed_peak_measurements_hold_todays_predictions():
    """researcher_4 shows benchmarks/results/planner_peak.json: its predictions must be this planner's
    (change the planner, then run `make planner-peak`)."""
    import json
    from pathlib import Path
    results = json.loads((Path(__file__).resolve().parents[2] / "benchmarks/results/planner_peak.json").read_text())
    for key in ("gpt2_shape", "small_vocabulary"):
        sweep = results[key]
        s = sweep["shape"]
        shape = TransformerShape(s["name"], s["layers"], s["hidden"], s["heads"], s["seq_len"], s["vocab"])
        assert shape.parameters == s["parameters"]
        assert len(sweep["rows"]) == 12  # b = 1, 2, 4 x checkpointing x SDPA
        for row in sweep["rows"]:
            paper = transformer_memory(shape, row["b"], row["checkpointing"], row["sdpa"], FLOAT32)
            assert (row["predicted_peak_bytes"], row["predicted_moments"]) == (paper.peak, paper.moments())
            assert row["fixed_bytes"] == paper.fixed  # float32 Adam: 16 bytes per parameter, measured and predicted
