"""What the explorer shows of a `RunRecord`: its two panels, each drawn onto a given `Axes` and moved in place
(the gradient pile, the loss; each series styled by line and marker as well as colour, so greyscale reads it),
and its readout in sentences: `plain` (as people say it, each line ending in ✓ or ✗) or `detailed` (the
`allclose` verdict at the lab's tolerance, the optimizer, the learning rates and a mistake's symptoms)."""
from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import matplotlib.axes
import matplotlib.lines
from matplotlib.ticker import MaxNLocator

from widgets.core.accumulation import GRAD_ATOL, GRAD_RTOL, below
from widgets.core.config import OPTIMIZERS
from widgets.core.mistakes import MISTAKES
from widgets.core.training import DIVERGED_LOSS_FACTOR, REGIMES, RunRecord, clip_flat
from widgets.core.views import Table
from widgets.draw.style import FONT_PT, OKABE_ITO, TITLE_PT, legend_below

REGIME_STYLE = {
    "accumulated": dict(color=OKABE_ITO[0], linestyle="-", marker="o", markersize=4, linewidth=2.2),
    "big_batch": dict(color=OKABE_ITO[1], linestyle="--", marker="s", markersize=6, linewidth=1.6, markerfacecolor="none"),
    "small_batch": dict(color=OKABE_ITO[2], linestyle=":", marker="^", markersize=4, linewidth=1.6),
}
REGIME_LABEL = {  # short, so that the three fit in one row under a panel
    "accumulated": "accumulated",
    "big_batch": "big batch",  # K·b examples at once
    "small_batch": "small batch",  # b examples per update, no accumulation
}
READOUTS = ("plain", "detailed")
# The panels' words: "plain" as the beginner tier speaks (weights are knobs, .grad the blame, and the notebook
# says once what the loss is; updates counted from 1), "detailed" as PyTorch does (updates counted from 0, as
# the detailed readout, the loops' indices and the auditor count them).
KNOBS = {"0.weight[0]": "knob A", "2.weight[0]": "knob B", "2.bias": "knob C"}
PANEL_WORDS = {
    "plain": dict(pile_title="The pile in update 1 (dashed: big batch)", pile_y="blame (.grad)",
                  loss_y="loss on all examples"),
    "detailed": dict(pile_title=".grad pile, update 0 (dashed: big batch)", pile_y=".grad of the parameter",
                     loss_y="loss on all examples (MSE)"),
}


@dataclass
class PileArtists:
    """The lines `draw_gradient_pile` made: one pile and one target line per parameter."""

    piles: list[matplotlib.lines.Line2D]
    targets: list[matplotlib.lines.Line2D]


def _pile_steps_and_values(record: RunRecord, index: int) -> tuple[list[int], list[float]]:
    """Micro-step 0 is the empty pile (zero); micro-step k is the pile after k backward passes."""
    values = [0.0] + record.first_pile.pile[:, index].tolist()
    return list(range(len(values))), values


def draw_gradient_pile(record: RunRecord, ax: matplotlib.axes.Axes, words: str = "detailed") -> PileArtists:
    """Plot `.grad` of a few parameters after each micro-step of update 1, each pile's big-batch target dashed;
    `words` "plain" names them as the beginner tier does (`KNOBS`), "detailed" as PyTorch does."""
    piles, targets = [], []
    for i, (name, index) in enumerate(record.plotted_parameters.items()):
        colour = OKABE_ITO[(i + 3) % len(OKABE_ITO)]
        xs, ys = _pile_steps_and_values(record, index)
        label = KNOBS[name] if words == "plain" else name
        (pile,) = ax.plot(xs, ys, color=colour, marker="os^"[i], drawstyle="steps-post", label=label)
        target = ax.axhline(float(record.first_target[index]), color=colour, linestyle="--", linewidth=1)
        piles.append(pile)
        targets.append(target)
    ax.axhline(0.0, color="0.6", linewidth=0.6)
    ax.xaxis.set_major_locator(MaxNLocator(nbins=8, integer=True))
    ax.yaxis.set_major_locator(MaxNLocator(nbins=5))
    _scale_pile_axis(record, ax)
    ax.set_xlabel("micro_step (backward passes so far)", fontsize=FONT_PT)
    ax.set_ylabel(PANEL_WORDS[words]["pile_y"], fontsize=FONT_PT)
    ax.set_title(PANEL_WORDS[words]["pile_title"], fontsize=TITLE_PT)
    ax.tick_params(labelsize=FONT_PT)
    legend_below(ax, ncols=len(piles))
    return PileArtists(piles, targets)


def update_gradient_pile(record: RunRecord, ax: matplotlib.axes.Axes, artists: PileArtists) -> PileArtists:
    """Move the lines made by `draw_gradient_pile` to a new record, in place, and rescale."""
    for pile, target, index in zip(artists.piles, artists.targets, record.plotted_parameters.values()):
        pile.set_data(*_pile_steps_and_values(record, index))
        y = float(record.first_target[index])
        target.set_ydata([y, y])
    _scale_pile_axis(record, ax)
    return artists


def _scale_pile_axis(record: RunRecord, ax: matplotlib.axes.Axes) -> None:
    """Fit the pile's axes, keeping the limits where the data fill them reasonably: unchanged limits
    let the explorer blit (`FastCanvas`). Powers of two on x: K = 5 fills 5/8, and K = 5..8 share it."""
    ax.set_xlim(-0.3, (1 << (record.config.accumulation_steps - 1).bit_length()) + 0.3)
    values = [0.0]
    for index in record.plotted_parameters.values():
        values += _pile_steps_and_values(record, index)[1] + [float(record.first_target[index])]
    values = [v for v in values if math.isfinite(v)]
    lo, hi = min(values), max(values)
    span = max(hi - lo, 1e-12)
    old_lo, old_hi = ax.get_ylim()
    if ax.get_autoscaley_on() or lo < old_lo or hi > old_hi or span < 0.3 * (old_hi - old_lo):
        # limits on a 1-2-5 grid around [lo, hi], a little room either side: many settings share them, and blit
        magnitude = 10 ** math.floor(math.log10(span / 4))
        step = next(m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= span / 4)
        ax.set_ylim((math.floor(lo / step) - 0.5) * step, (math.ceil(hi / step) + 0.5) * step)


def _updates_and_losses(record: RunRecord, regime: str) -> tuple[list[int], list[float]]:
    """Update 0 is the starting loss; update u is the loss after u optimizer steps."""
    values = [record.initial_eval_loss] + record.eval_loss[regime]
    return list(range(len(values))), values


def draw_loss_curves(record: RunRecord, ax: matplotlib.axes.Axes, words: str = "detailed") -> dict[str, matplotlib.lines.Line2D]:
    """Plot the full-data loss after each update for the three regimes; returns a line per regime."""
    lines = {}
    for regime in REGIMES:
        (lines[regime],) = ax.plot(*_updates_and_losses(record, regime), label=REGIME_LABEL[regime], **REGIME_STYLE[regime])
    ax.set_xlabel("update (optimizer steps)", fontsize=FONT_PT)
    ax.set_ylabel(PANEL_WORDS[words]["loss_y"], fontsize=FONT_PT)
    ax.set_title("Loss per update", fontsize=TITLE_PT)
    ax.tick_params(labelsize=FONT_PT)
    legend_below(ax, ncols=len(lines))
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    _scale_loss_axis(record, ax)
    return lines


def update_loss_curves(record: RunRecord, ax: matplotlib.axes.Axes, lines: dict[str, matplotlib.lines.Line2D]) -> dict:
    """Move the lines made by `draw_loss_curves` to a new record, in place, and rescale."""
    for regime, line in lines.items():
        line.set_data(*_updates_and_losses(record, regime))
    _scale_loss_axis(record, ax)
    return lines


def _scale_loss_axis(record: RunRecord, ax: matplotlib.axes.Axes) -> None:
    """Fixed limits from 0 to 2x the starting loss: the same for every K and b, so curves can be
    compared by eye from one setting to the next (a diverging run leaves through the top)."""
    ax.set_xlim(-0.5, record.config.total_updates + 0.5)
    ax.set_ylim(0, 2 * record.initial_eval_loss)


def readout_lines(record: RunRecord, notes: list[str] | tuple[str, ...] = (), kind: str = "plain") -> list[str]:
    """The explorer's readout as sentences, computed from `record`, then any `notes`; `kind` is "plain" or "detailed"."""
    if kind not in READOUTS:  # a notebook calls this directly
        raise ValueError(f"readout must be one of {READOUTS}, got {kind!r}")
    return (_plain_lines(record) if kind == "plain" else _detailed_lines(record)) + list(notes)


def _times(factor: float) -> str:
    """A factor as people say it, two digits, as a multiple of the smaller: 4.0 -> "4×", 0.25 -> "4×"."""
    return f"{factor:.2g}×" if factor >= 1 else f"{1 / factor:.2g}×"


def _plain_lines(record: RunRecord) -> list[str]:
    c = record.config
    K, b, m = c.accumulation_steps, c.micro_batch_size, c.mistake
    lines = [f"each update: {K} micro-batches of {b} = {c.effective_batch_size} examples"]
    scale = record.grad_scale[0] if record.grad_scale else None
    if record.both_diverged:
        lines.append("gradient: no verdict, both runs blew up: lower the learning rate ✗")
    elif record.grads_allclose:
        lines.append("gradient: the same as the big batch's ✓")
    elif m is not None and MISTAKES[m].scales and scale and not math.isclose(scale, 1, rel_tol=0.01):
        lines.append(f"gradient: {_times(scale)} too {'big' if scale > 1 else 'small'} ✗")
    else:
        lines.append("gradient: not the big batch's ✗")
    if not record.learning_rates_match:
        lines.append("learning rate: not the big batch's ✗")
    blew_up, steps = record.diverged_at["accumulated"], record.optimizer_steps
    if blew_up is not None and not record.both_diverged:  # its watch stopped there: one line says why
        lines.append(f"updates: blew up at update {blew_up + 1}, so it made {blew_up + 1} of {c.total_updates}: "
                     "lower the learning rate ✗")
    elif steps["accumulated"] != steps["big_batch"] and not record.both_diverged:  # the loop's own count
        lines.append(f"updates: {steps['accumulated']} where the big batch makes {steps['big_batch']} ✗")
    if not record.log_matches and m == "log_divided_loss":
        true, logged = record.true_train_loss[0], record.train_loss["accumulated"][0]
        lines.append(f"logged loss: {_times(true / logged)} too small; the training itself is right ✗")
    lines += [f"time: {K} passes per update (the big batch: 1)",
              f"memory: {Fraction(1, K)} of the big batch" if K > 1 else "memory: the same as the big batch"]
    if m is not None:
        lines.append(f"mistake: {MISTAKES[m].label}" + (" (with one micro-batch per update it changes nothing)"
                                                        if K == 1 else ""))
    return lines


def _detailed_lines(record: RunRecord) -> list[str]:
    c = record.config
    K, b = c.accumulation_steps, c.micro_batch_size
    lines = [f"effective_batch_size = K x b = {K} x {b} = {c.effective_batch_size}", _gradient_line(record)]
    if c.optimizer != "sgd":
        lines.append(f"optimizer: {OPTIMIZERS[c.optimizer]}: each step divides by the gradient's running size, "
                     "so a constant factor on every gradient nearly cancels")
    rates = record.learning_rates
    if record.learning_rates_match and c.warmup_updates:
        lines.append("learning rates match: True (the warmup gives both runs the same rate at every update)")
    elif not record.learning_rates_match:
        u = next(u for u, (a, big) in enumerate(zip(rates["accumulated"], rates["big_batch"])) if a != big)
        lines.append(f"learning rates match: False (update {u}: accumulated {rates['accumulated'][u]:.3g}, "
                     f"big batch {rates['big_batch'][u]:.3g})")
    lines += [
        f"forward/backward passes per update: accumulated {K}, big batch 1 (time grows with K)",
        f"activation memory of the accumulated run: b / (K x b) = 1/{K} of the big batch (memory grows with b)",
    ]
    if c.mistake is not None:
        lines.append(f"mistake: {MISTAKES[c.mistake].label}")
        if K == 1:
            lines.append("with K = 1 there is nothing to accumulate, so this mistake changes nothing")
        else:
            lines += mistake_symptoms(record)
    for regime, update in record.diverged_at.items():
        if update is not None:
            lines.append(
                f"the {regime.replace('_', ' ')} run diverged at update {update} (its loss was not finite or over "
                f"{DIVERGED_LOSS_FACTOR:g} x where it started): lower the learning rate"
            )
    return lines


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


def _gradient_line(record: RunRecord) -> str:
    """The largest gradient difference and its verdict at the lab's tolerance; no verdict once both
    runs blew up, since relative closeness of two exploding gradients says nothing about accumulation."""
    said = f"max |accumulated - big-batch gradient| = {record.max_grad_diff:.2e} -> "
    if record.both_diverged:
        first = min(record.diverged_at["accumulated"], record.diverged_at["big_batch"])
        return said + f"no verdict: both runs diverged (from update {first})"
    if record.grads_allclose:  # rounding only: its last digits differ from one CPU to the next, so none are printed
        return (f"max |accumulated - big-batch gradient|: rounding only, within the lab's tolerance (rtol {GRAD_RTOL:g}, "
                f"atol {GRAD_ATOL:g}) -> gradients allclose: True")
    return said + "gradients allclose: False"


def loss_table(record: RunRecord, updates: int | None = None, regimes: tuple[str, ...] = REGIMES) -> Table:
    """The loss on all examples after each update (the first `updates`), a column per regime, 3 decimals:
    the numbers behind the explorer's right-hand picture."""
    count = len(record.eval_loss["big_batch"]) if updates is None else updates
    rows = [[u + 1, *(f"{record.eval_loss[r][u]:.3f}" for r in regimes)] for u in range(count)]
    headers = ["after update", *(REGIME_LABEL[r] for r in regimes)]
    return Table(headers, rows, right=frozenset(headers))
