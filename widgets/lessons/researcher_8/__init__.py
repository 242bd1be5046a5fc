"""researcher_8, RL and MoE losses: policy-gradient normalisers and the balance loss under K."""
from widgets.audit.auditor import audit_training_loop
from widgets.audit.problems import completion_tokens
from widgets.core.accumulation import flat_grad
from widgets.core.views import Table
from widgets.draw.stills import still
from widgets.draw.style import new_figure
from widgets.lessons.researcher_8.draw import draw_expert_load, draw_token_weights
from widgets.lessons.researcher_8.exercises import losses_exercises
from widgets.lessons.researcher_8.moe import (
    aux_values, expert_counts, full_batch_step, make_domain_tokens, router_z_loss_sum, step_gradient, TinyMoE,
    train_router,
)
from widgets.lessons.researcher_8.off_policy import clipped_token_losses, group_advantages
from widgets.lessons.researcher_8.packing import (
    AttentionPolicy, lay_out, pack, packed_gradient, row_token_losses, unpack,
)
from widgets.lessons.researcher_8.rl_losses import (
    generation_update_gradients, invariance, LOSS_TYPES, make_completions, partition, TinyPolicy, token_losses,
    token_weights, window_token_mean_gradient,
)
from widgets.research.references import cite
