"""researcher_8, RL and MoE losses: policy-gradient normalisers and the balance loss under K.

The notebook's one import surface: every name it uses comes from here, each loaded on first use.
"""
from widgets.core.surface import lazy_surface

_NAMES = {
    "still": "widgets.draw.stills",
    "new_figure": "widgets.draw.style",
    "audit_training_loop": "widgets.audit.auditor",
    "completion_tokens": "widgets.audit.rl_problem",
    "flat_grad": "widgets.core.accumulation",
    "draw_expert_load": "widgets.lessons.researcher_8.draw",
    "draw_token_weights": "widgets.lessons.researcher_8.draw",
    "losses_exercises": "widgets.lessons.researcher_8.exercises",
    "aux_values": "widgets.lessons.researcher_8.moe",
    "expert_counts": "widgets.lessons.researcher_8.moe",
    "full_batch_step": "widgets.lessons.researcher_8.moe",
    "make_domain_tokens": "widgets.lessons.researcher_8.moe",
    "router_z_loss_sum": "widgets.lessons.researcher_8.moe",
    "step_gradient": "widgets.lessons.researcher_8.moe",
    "TinyMoE": "widgets.lessons.researcher_8.moe",
    "train_router": "widgets.lessons.researcher_8.moe",
    "clipped_token_losses": "widgets.lessons.researcher_8.off_policy",
    "group_advantages": "widgets.lessons.researcher_8.off_policy",
    "generation_update_gradients": "widgets.lessons.researcher_8.rl_losses",
    "invariance": "widgets.lessons.researcher_8.rl_losses",
    "LOSS_TYPES": "widgets.lessons.researcher_8.rl_losses",
    "make_completions": "widgets.lessons.researcher_8.rl_losses",
    "partition": "widgets.lessons.researcher_8.rl_losses",
    "TinyPolicy": "widgets.lessons.researcher_8.rl_losses",
    "token_losses": "widgets.lessons.researcher_8.rl_losses",
    "token_weights": "widgets.lessons.researcher_8.rl_losses",
    "window_token_mean_gradient": "widgets.lessons.researcher_8.rl_losses",
    "cite": "widgets.research.references",
}
__all__ = sorted(_NAMES)
__getattr__, __dir__ = lazy_surface(__name__, _NAMES)
