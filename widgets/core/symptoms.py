"""What a run's mistake did, in a sentence or two with the number that gives it away (read off a RunRecord)."""
from __future__ import annotations

from widgets.core.floor import below
from widgets.core.mistakes import MISTAKES
from widgets.core.training import RunRecord, clip_flat


def mistake_symptoms(record: RunRecord) -> list[str]:
    """The sentences that give the run's mistake away, each with its number ([] for no mistake)."""
    c, out, scales = record.config, [], record.grad_scale
    K, tail, m = c.accumulation_steps, c.tail_micro_batches, c.mistake
    steps = record.optimizer_steps
    counted = f"optimizer steps: accumulated {steps['accumulated']}, big batch {steps['big_batch']}"
    if m and MISTAKES[m].scales and not MISTAKES[m].needs and scales:  # every update scaled, not only a tail
        out.append(f"update 0 applied {scales[0]:.3g} x the big-batch gradient (K = {K})")
        if c.optimizer == "adamw":
            # Below 1e-5 the gap is float32 rounding, whose digits differ per CPU: print the bound.
            gap = record.weight_gap
            shown = below(gap, 1e-5) if gap < 1e-5 else f"{gap:.2g}"
            out.append(f"under AdamW the factor nearly cancels: at the end |w_accumulated - w_big_batch| is "
                       f"{shown} x |w_big_batch - w_start|")
        if c.max_grad_norm is not None and record.grads_allclose:
            out.append(f"clipping to max_grad_norm = {c.max_grad_norm:g} cut both gradients to the same length, "
                       "which hides this mistake: the direction was right, only the length was wrong")
    if m == "zero_grad_every_micro_step" and scales:
        out.append(f"update 0 applied only the last micro-batch's share: {scales[0]:.3g} x the big-batch size")
    if m == "step_every_micro_step":
        out.append(counted)
    if m == "forget_final_step":
        out += [f"the short last window of {tail} micro-batch(es) never got its step", counted]
    if m == "tail_divided_by_k" and len(scales) == c.total_updates:
        share = f" = {tail}/{K}" if c.max_grad_norm is None else " (after clipping)"
        out.append(f"the short last window of {tail} micro-batch(es) applied {scales[-1]:.3g}{share} x its big-batch "
                   "gradient, not 1")
    if m == "log_divided_loss" and record.true_train_loss:
        logged, true = record.train_loss["accumulated"][0], record.true_train_loss[0]
        out += [f"logged train_loss at update 0 = {logged:.4g}, true mean = {true:.4g}: {true / logged:.3g} x too small",
                "the gradients are unaffected"]
    if m == "clip_every_micro_step":
        once = clip_flat(record.first_target, c.max_grad_norm)
        off = float((record.first_applied - once).norm() / once.norm())
        out.append(f"clipped every micro-step, update 0's gradient is off by {off:.1%} of the once-clipped gradient")
    if m == "scheduler_every_micro_step":
        full = {r: next((u for u, lr in enumerate(v) if lr >= c.learning_rate), None)
                for r, v in record.learning_rates.items()}
        out.append(f"warmup of {c.warmup_updates} updates: full learning rate from update {full['accumulated']} "
                   f"(accumulated) instead of {full['big_batch']} (big batch)")
    return out
