"""What each switched-on bug did to a run, in one plain sentence with the number that gives it away.

The explorer prints these under its figure and the bug gallery prints them per bug: they read a
`RunRecord` (from `widgets.core.training.run_regimes`) and never train anything themselves.
"""
from __future__ import annotations

from widgets.core.floor import below
from widgets.core.training import RunRecord, clip_flat


# The bugs that only put a constant factor on gradients (the tail bug: on the last update's only).
SCALE_BUGS = frozenset({"loss_not_divided", "loss_divided_twice", "tail_divided_by_k"})


def bug_symptoms(record: RunRecord) -> list[str]:
    """One plain sentence per bug switched on, with the number that gives it away."""
    if not isinstance(record, RunRecord):
        raise TypeError(f"record must be a RunRecord (from run_regimes), got {type(record).__name__}")
    c, out, scales = record.config, [], record.grad_scale
    K, tail, bugs = c.accumulation_steps, c.tail_micro_batches, c.bugs
    steps = record.optimizer_steps
    counted = f"optimizer steps: accumulated {steps['accumulated']}, big batch {steps['big_batch']}"
    if bugs & {"loss_not_divided", "loss_divided_twice"} and scales:
        out.append(f"update 0 applied {scales[0]:.3g} x the big-batch gradient (K = {K})")
        if c.optimizer == "adamw" and not bugs - SCALE_BUGS:
            # Below 1e-5 the gap is float32 rounding, whose digits differ per CPU: print the bound.
            gap = record.weight_gap
            shown = below(gap, 1e-5) if gap < 1e-5 else f"{gap:.2g}"
            out.append(f"under AdamW the factor nearly cancels: at the end |w_accumulated - w_big_batch| is "
                       f"{shown} x |w_big_batch - w_start|")
        if c.max_grad_norm is not None and record.grads_allclose:
            out.append(f"clipping to max_grad_norm = {c.max_grad_norm:g} cut both gradients to the same length, "
                       "which hides this bug: the direction was right, only the length was wrong")
    if "zero_grad_every_micro_step" in bugs and scales:
        out.append(f"update 0 applied only the last micro-batch's share: {scales[0]:.3g} x the big-batch size")
    if "step_every_micro_step" in bugs:
        out.append(counted)
    if "forget_final_step" in bugs:
        out.append(f"the final window of {tail} micro-batch(es) never got its step; {counted}")
    if "tail_divided_by_k" in bugs and len(scales) == c.total_updates:
        share = f" = {tail}/{K}" if c.max_grad_norm is None else " (after clipping)"
        out.append(f"the final window of {tail} micro-batch(es) applied {scales[-1]:.3g}{share} x its big-batch "
                   "gradient, not 1")
    if "log_divided_loss" in bugs and record.true_train_loss:
        logged, true = record.train_loss["accumulated"][0], record.true_train_loss[0]
        out.append(f"logged train_loss at update 0 = {logged:.4g}, true mean = {true:.4g}: "
                   f"{true / logged:.3g} x too small; the gradients are unaffected")
    if "clip_every_micro_step" in bugs:
        once = clip_flat(record.first_target, c.max_grad_norm)
        off = float((record.first_applied - once).norm() / once.norm())
        out.append(f"clipped every micro-step, update 0's gradient is off by {off:.1%} of the once-clipped gradient")
    if "scheduler_every_micro_step" in bugs:
        full = {r: next((u for u, lr in enumerate(v) if lr >= c.learning_rate), None)
                for r, v in record.learning_rates.items()}
        out.append(f"warmup of {c.warmup_updates} updates: full learning rate from update {full['accumulated']} "
                   f"(accumulated) instead of {full['big_batch']} (big batch)")
    return out
