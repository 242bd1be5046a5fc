"""researcher_5, many machines: two real gloo processes with DDP, no_sync and the all-reduce."""
from widgets.core.accumulation import flat_grad
from widgets.core.accumulation import below
from widgets.lessons.researcher_5.exercises import machines_exercises
from widgets.research.ddp import (
    communication_per_update, DDPConfig, DDPError, free_port, make_ddp_mlp, ring_allreduce_bytes, run_ddp,
    sampler_shards, sharded_gradient_bytes,
)
from widgets.research.planner import PRESETS
from widgets.research.references import cite
from widgets.research.tokens import (
    accumulate_window, big_batch_token_gradient, IGNORE_INDEX, make_token_batch, split_window, TinyCausalLM,
)
