"""researcher_5, many machines: two real gloo processes with DDP, no_sync and the all-reduce.

The notebook's one import surface: every name it uses comes from here, each loaded on first use.
"""
from widgets.core.surface import lazy_surface

_NAMES = {
    "flat_grad": "widgets.core.accumulation",
    "below": "widgets.core.floor",
    "machines_exercises": "widgets.lessons.researcher_5.exercises",
    "cite": "widgets.research.references",
    "communication_per_update": "widgets.research.ddp",
    "DDPConfig": "widgets.research.ddp",
    "DDPError": "widgets.research.ddp",
    "free_port": "widgets.research.ddp",
    "make_ddp_mlp": "widgets.research.ddp",
    "ring_allreduce_bytes": "widgets.research.ddp",
    "run_ddp": "widgets.research.ddp",
    "sampler_shards": "widgets.research.ddp",
    "sharded_gradient_bytes": "widgets.research.ddp",
    "PRESETS": "widgets.research.planner",
    "accumulate_window": "widgets.research.tokens",
    "big_batch_token_gradient": "widgets.research.tokens",
    "IGNORE_INDEX": "widgets.research.tokens",
    "make_token_batch": "widgets.research.tokens",
    "split_window": "widgets.research.tokens",
    "TinyCausalLM": "widgets.research.tokens",
}
__all__ = sorted(_NAMES)
__getattr__, __dir__ = lazy_surface(__name__, _NAMES)
