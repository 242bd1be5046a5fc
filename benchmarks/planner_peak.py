"""The planner's predicted peak against the peak the CPU allocator reaches, on a transformer of GPT-2's shape.

    python benchmarks/planner_peak.py        # (make planner-peak; make benchmark runs it too)

GPT-2 small's shape (12 layers, heads of 64, the 50,257-token vocabulary, a tied embedding) at a
quarter of its width (192, 3 heads) and a quarter of its sequence length (256), float32, plain
Adam, no dropout: a full GPT-2 small with its gradients and Adam's state is about 2 GB, over the
lab's 1,024 MB budget, so researcher_4 reads this file instead of measuring in its kernel.

For each micro-batch size b in 1, 2, 4, with and without checkpointing every block, with plain and
with SDPA attention: one micro-step inside an accumulation window (the gradient buffer and Adam's
state already exist, as after a first update), forward and backward, under `torch.profiler` with
`profile_memory=True`. The profiler records every allocation and free of the CPU allocator; their
running sum, at its highest, is the peak above what existed before (weights, gradients, Adam's
state, counted from the tensors). The optimizer step's own peak is recorded beside it. Predicted:
`widgets.research.planner.transformer_memory` at `FLOAT32` for the same shape.

Then the same layers with a 512-token vocabulary, where the loss is small and a layer's backward
sets the peak (there the planner counts the gradients of one layer's activations as large as the
activations themselves, an upper estimate).

Writes benchmarks/results/planner_peak.json: the setup, and for each shape one row per (b,
checkpointing, SDPA) with the measured and predicted peaks and the planner's terms, and its
largest gap.
"""
from __future__ import annotations

import argparse
import datetime
import json
import platform
import sys
import time
from pathlib import Path

import torch

from widgets.research.memory import TinyGPT, language_model_batch, lm_loss, optimizer_state_bytes, tensor_bytes
from widgets.research.planner import FLOAT32, TransformerShape, transformer_memory
from widgets.research.saved_bytes import allocator_peak

ROOT = Path(__file__).resolve().parents[1]
RESULT = ROOT / "benchmarks" / "results" / "planner_peak.json"
SHAPE = TransformerShape("GPT-2 shape at 1/4 width and 1/4 sequence", layers=12, hidden=192, heads=3, seq_len=256,
                         vocab=50257)
# the same layers with a 512-token vocabulary: the loss is small, so the layers' backward sets the peak
# (where the planner counts the gradients of one layer's activations as large as the activations)
SMALL_VOCABULARY = TransformerShape("the same with a 512-token vocabulary", layers=12, hidden=192, heads=3,
                                    seq_len=256, vocab=512)
MICRO_BATCH_SIZES = (1, 2, 4)


def measure(shape: TransformerShape, micro_batch_size: int, checkpointing: bool, sdpa: bool) -> dict:
    """One row: the measured peak of a micro-step inside the window, and the planner's prediction."""
    model = TinyGPT(layers=shape.layers, hidden=shape.hidden, heads=shape.heads, seq_len=shape.seq_len,
                    vocab=shape.vocab, dropout=0.0, sdpa=sdpa)
    model.checkpoint_blocks = checkpointing
    optimizer = torch.optim.Adam(model.parameters())
    tokens, targets = language_model_batch(model, micro_batch_size)
    lm_loss(model, tokens, targets).backward()  # a first update: Adam's state and the gradient buffer exist
    optimizer.step()
    optimizer.zero_grad(set_to_none=False)  # the window's buffer, zeroed and kept: backward adds into it
    fixed = tensor_bytes(model.parameters()) + tensor_bytes(p.grad for p in model.parameters()) \
        + optimizer_state_bytes(optimizer)
    start = time.perf_counter()
    micro_step = allocator_peak(lambda: lm_loss(model, tokens, targets).backward())
    seconds = time.perf_counter() - start
    step = allocator_peak(optimizer.step)
    predicted = transformer_memory(shape, micro_batch_size, recompute=checkpointing, sdpa=sdpa, precision=FLOAT32)
    measured = fixed + micro_step
    return {
        "b": micro_batch_size, "checkpointing": checkpointing, "sdpa": sdpa,
        "fixed_bytes": fixed, "predicted_fixed_bytes": predicted.fixed,
        "measured_peak_bytes": measured, "measured_above_fixed": micro_step,
        "optimizer_step_above_fixed": step,
        "predicted_peak_bytes": predicted.peak, "predicted_above_fixed": predicted.peak - predicted.fixed,
        "predicted_paper_total_bytes": predicted.paper_total,
        "predicted_moments": predicted.moments(),
        "gap": round(predicted.peak / measured - 1, 4),
        "gap_above_fixed": round((predicted.peak - predicted.fixed) / micro_step - 1, 4),
        "seconds": round(seconds, 2),
    }


def describe(shape: TransformerShape) -> dict:
    return {"name": shape.name, "layers": shape.layers, "hidden": shape.hidden, "heads": shape.heads,
            "seq_len": shape.seq_len, "vocab": shape.vocab, "parameters": shape.parameters}


def sweep(shape: TransformerShape) -> dict:
    """Every (b, checkpointing, SDPA) for one shape, printed as it goes, and its largest gap."""
    rows = []
    print(shape.name, flush=True)
    for b in MICRO_BATCH_SIZES:
        for checkpointing in (False, True):
            for sdpa in (False, True):
                row = measure(shape, b, checkpointing, sdpa)
                rows.append(row)
                print(f"  b = {b}, checkpointing {checkpointing!s:5s}, SDPA {sdpa!s:5s}: measured "
                      f"{row['measured_peak_bytes'] / 1e6:7.1f} MB, predicted {row['predicted_peak_bytes'] / 1e6:7.1f} MB "
                      f"({row['gap']:+.1%}; above the fixed {row['gap_above_fixed']:+.1%}), step "
                      f"{row['optimizer_step_above_fixed'] / 1e6:.1f} MB above the fixed", flush=True)
    worst = max(rows, key=lambda r: abs(r["gap"]))
    print(f"  largest gap {worst['gap']:+.1%} (b = {worst['b']}, checkpointing {worst['checkpointing']}, "
          f"SDPA {worst['sdpa']})", flush=True)
    return {"shape": describe(shape), "rows": rows,
            "largest_gap": {key: worst[key] for key in ("b", "checkpointing", "sdpa", "gap", "gap_above_fixed")}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.parse_args()
    torch.set_num_threads(1)  # a shared machine; the allocator's peak does not depend on the thread count here
    result = {
        "what": "the planner's predicted peak (widgets.research.planner.transformer_memory, FLOAT32) against the CPU "
                "allocator's peak (torch.profiler memory events) of one micro-step inside an accumulation window",
        "date": datetime.date.today().isoformat(),
        "machine": {"cpu": platform.processor() or platform.machine(), "python": sys.version.split()[0],
                    "torch": torch.__version__.split("+")[0], "threads": 1},
        "setup": {"tied_embedding": True, "dropout": 0.0, "dtype": "float32", "optimizer": "Adam",
                  "micro_batch_sizes": list(MICRO_BATCH_SIZES)},
        "gpt2_shape": sweep(SHAPE),
        "small_vocabulary": sweep(SMALL_VOCABULARY),
    }
    RESULT.write_text(json.dumps(result, indent=1) + "\n")
    print(f"written to {RESULT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
