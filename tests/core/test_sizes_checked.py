"""Every size is checked before anything is allocated: each public builder that takes a size (found by
its signature: benchmarks/sizes.py says how) is listed here, and an enormous size given to any of its
size parameters allocates nothing past the budget (LAB_MEMORY_LIMIT_MB=256).

A new builder fails `test_every_builder_is_listed` until it is added below, which asks its author to
check its sizes (widgets/core/config.py) before it makes anything; `make reliability` records the
same run in benchmarks/results/reliability.json.
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SIZES = [sys.executable, str(ROOT / "benchmarks" / "sizes.py")]
ENV = {**os.environ, "MALLOC_ARENA_MAX": "2"}

LISTED = {
    "widgets.core.accumulation.make_regression_data",
    "widgets.core.accumulation.micro_batch_weight",
    "widgets.core.accumulation.windows",
    "widgets.core.config.AccumulationConfig",
    "widgets.core.training.linear_warmup",
    "widgets.lessons.beginner_1.bricks.trips_table",
    "widgets.lessons.beginner_1.controls.make_bricks_widget",
    "widgets.lessons.beginner_2.controls.make_accumulation_explorer",
    "widgets.lessons.beginner_2.exercises.lowest_final_loss",
    "widgets.lessons.beginner_2.exercises.pile_over_big_batch",
    "widgets.lessons.beginner_2.trade.kept_for_backward",
    "widgets.lessons.beginner_2.trade.memory_share",
    "widgets.lessons.researcher_1.fp16.fp16_problem",
    "widgets.lessons.researcher_1.precision.make_precision_problem",
    "widgets.lessons.researcher_2.batchnorm.GhostBatchNorm1d",
    "widgets.lessons.researcher_2.batchnorm.make_norm_data",
    "widgets.lessons.researcher_2.batchnorm.running_stats_after_one_update",
    "widgets.lessons.researcher_2.contrastive.make_encoders",
    "widgets.lessons.researcher_2.contrastive.make_pairs",
    "widgets.lessons.researcher_2.dropout.DropoutMLP",
    "widgets.lessons.researcher_2.dropout.make_dropout_data",
    "widgets.lessons.researcher_2.once_per_update.run_once_per_update",
    "widgets.lessons.researcher_3.critical_batch.make_teacher_problem",
    "widgets.lessons.researcher_3.critical_batch.training_estimate",
    "widgets.lessons.researcher_3.critical_race.race_estimate",
    "widgets.lessons.researcher_4.timing.time_per_update",
    "widgets.lessons.researcher_6.across_ranks.RanksConfig",
    "widgets.lessons.researcher_6.invariance.grid",
    "widgets.lessons.researcher_6.invariance.random_window",
    "widgets.lessons.researcher_7.controls.make_pipeline_explorer",
    "widgets.lessons.researcher_7.fsdp.FSDPConfig",
    "widgets.lessons.researcher_7.fsdp.make_fsdp_mlp",
    "widgets.lessons.researcher_7.pipeline.make_micro_batches",
    "widgets.lessons.researcher_7.pipeline.make_mlp",
    "widgets.lessons.researcher_7.window.make_windows",
    "widgets.lessons.researcher_8.moe.TinyMoE",
    "widgets.lessons.researcher_8.moe.make_domain_tokens",
    "widgets.lessons.researcher_8.rl_losses.TinyPolicy",
    "widgets.lessons.researcher_8.rl_losses.make_completions",
    "widgets.lessons.researcher_8.rl_losses.partition",
    "widgets.lessons.researcher_9.adam_k.make_regression",
    "widgets.research.ddp.DDPConfig",
    "widgets.research.ddp.RankGrid",
    "widgets.research.ddp.make_data",
    "widgets.research.memory.TinyGPT",
    "widgets.research.memory.tiny_gpt_parameters",
    "widgets.research.planner.Sharding",
    "widgets.research.tokens.TinyCausalLM",
    "widgets.research.tokens.make_token_batch",
}


def test_every_builder_is_listed():
    found = json.loads(subprocess.run([*SIZES, "--list"], capture_output=True, text=True, check=True, env=ENV).stdout)
    assert sorted(set(found) - LISTED) == [], "new builders: check their sizes first (widgets/core/config.py), then list them"
    assert sorted(LISTED - set(found)) == [], "listed builders that no longer exist (or no longer take a size): drop them"


@pytest.mark.slow
def test_an_enormous_size_allocates_nothing_past_the_budget():
    run = subprocess.run([*SIZES, "--json"], capture_output=True, text=True, env=ENV, timeout=1800)
    result = json.loads(run.stdout)
    assert result["not_probed"] == {}  # every builder probed, those a notebook shows verbatim too
    assert result["builders"] == len(LISTED) and result["calls"] >= 2 * result["builders"]
    assert result["over_budget"] == [], json.dumps(result["over_budget"], indent=1)
