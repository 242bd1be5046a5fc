"""The one registry of mistakes: `EVERY_MISTAKE` names each one the lab knows (the auditor's, researcher_2's),
what it does and its fix; `MISTAKES` holds the classic ones, each a loop of `widgets.core.loops`, in menu order
(the explorer, the gallery and the symptom -> fix table list them). Torch-free at import."""
from __future__ import annotations

import difflib
import functools
import importlib
import inspect
import textwrap
from dataclasses import dataclass, field
from typing import Callable

from widgets.core.views import Table


@dataclass(frozen=True)
class Mistake:
    """One mistake; a classic one (a `label`) is also a loop of `widgets.core.loops` named `name`."""

    name: str  # the auditor's name for it
    does: str  # what is wrong
    fix: str  # the fix in one line
    label: str = ""  # classic only: what a control or a table calls it
    symptom: str = ""  # classic only: what a learner sees
    needs: tuple[str, ...] = ()  # explorer settings it needs to act (keys of widgets.core.config.NEEDS) ...
    setting: dict = field(default_factory=dict)  # ... and values that let it act there
    audit: dict = field(default_factory=dict)  # the options of audit_training_loop under which it shows
    scales: bool = False  # it only puts a constant factor on gradients (AdamW nearly cancels those)

    @property
    def loop(self) -> Callable:
        return getattr(importlib.import_module("widgets.core.loops"), self.name)

    def audit_call(self) -> tuple[Callable, dict]:
        """(loop, options) for `audit_training_loop(loop, **options)`: unclipped unless the audit clips."""
        if self.audit.get("clip_norm") is not None:
            return self.loop, dict(self.audit)
        loop = functools.partial(self.loop, max_norm=None)
        loop.__name__ = self.name  # the auditor's report names the loop
        return loop, dict(self.audit)


EVERY_MISTAKE: dict[str, Mistake] = {m.name: m for m in (
    # the classic mistakes (with a label), each a loop of widgets.core.loops
    Mistake("loss_not_divided", "each micro-batch's loss reaches backward() undivided: an update of n equal "
            "micro-batches is n x too big",
            "weight each micro-batch's mean loss by its share n_i/n of the update's examples (1/K for K equal "
            "micro-batches) before backward()",
            label="loss not divided by K",
            symptom="every update K x too big: the loss jumps, a learning rate tuned here changes meaning with K",
            scales=True),
    Mistake("zero_grad_every_micro_step", "zero_grad() empties the pile inside an update: it keeps only the last "
            "micro-batch",
            "call zero_grad() only after optimizer.step()",
            label="zero_grad every micro-step",
            symptom="updates far too small and noisy: only one micro-batch counts"),
    Mistake("step_every_micro_step", "optimizer.step() runs after every micro-step",
            "step only when an update is complete",
            label="optimizer step every micro-step",
            symptom="K times as many steps as updates; the run is not the big-batch run"),
    Mistake("loss_divided_twice", "each micro-batch's loss is divided twice: an update of n equal micro-batches is "
            "1/n of the reference",
            "weight each micro-batch's mean loss once, by its share n_i/n of the update's examples",
            label="loss divided by K twice",
            symptom="every update K x too small: training crawls",
            scales=True),
    Mistake("forget_final_step", "the uneven final window never gets its optimizer.step(): its gradient is thrown "
            "away",
            "also step on the last micro-step, e.g. with is_update_step(i, K, len(batches))",
            label="no step for a short last window",
            symptom="one update missing per epoch: the last examples never count",
            needs=("tail_micro_batches",), setting={"tail_micro_batches": 2}),
    Mistake("tail_divided_by_k", "the uneven final window is weighted 1/K per micro-batch, not by its own examples: "
            "its update is too small",
            "weight each micro-batch's mean loss of the final window by its share n_i/n of that window's examples",
            label="short last window divided by K",
            symptom="the last update of each epoch too small (2 of 4 micro-batches: half size)",
            needs=("tail_micro_batches",), setting={"tail_micro_batches": 2},
            scales=True),
    Mistake("log_divided_loss", "the logged loss is the divided one",
            "log loss.item() before dividing, each weighted by its share n_i/n of the update's examples",
            label="log the divided loss",
            symptom="the logged loss K x too small, and it moves when K changes"),
    Mistake("clip_every_micro_step", "clipping runs on the half-built pile inside an update",
            "clip once per update, after the last backward() and just before optimizer.step()",
            label="clip every micro-step",
            symptom="updates off in direction: early micro-batches count less",
            needs=("max_grad_norm",), setting={"max_grad_norm": 0.2},
            audit={"clip_norm": 1.0}),
    Mistake("scheduler_every_micro_step", "scheduler.step() runs every micro-step: the warmup ends K x too soon",
            "step the scheduler once per update, right after optimizer.step()",
            label="warmup stepped every micro-step",
            symptom="the learning rate reaches its full value K x too soon",
            needs=("warmup_updates",), setting={"warmup_updates": 4},
            audit={"with_scheduler": True}),
    # the auditor's other names
    Mistake("loss_sum_reduction", "the loss sums over the b examples of a micro-batch (reduction='sum'): updates b x "
            "too big",
            "use the mean, or divide the summed loss by all the examples of the update"),
    Mistake("wrong_loss_scale", "the micro-batch losses are scaled by factors other than their shares n_i/n of the "
            "update's examples",
            "weight each micro-batch's mean loss by its share n_i/n of the update's examples (1/K for K equal "
            "micro-batches)"),
    Mistake("normalised_per_micro_batch", "normalised per micro-batch instead of per window: each micro-batch's mean "
            "loss weighs the same in its update (1/n or 1/K), so an example (a token) in a short micro-batch weighs "
            "more than one in a long one",
            "weight each micro-batch's mean loss by its share n_i/n of the update's examples (real tokens), or sum "
            "the losses and divide by the window's count, taken before the first backward()"),
    Mistake("per_micro_batch_normaliser", "each micro-batch's -A log p is divided by its own completion tokens (TRL's "
            "'bnpo'), then averaged over the micro-batches: a token of a short micro-batch weighs more than one of a "
            "long one",
            "sum -A log p over the tokens and divide by the completion tokens of the whole window (DAPO), counted "
            "before the first backward()"),
    Mistake("grpo_sequence_mean", "each completion's -A log p is averaged over its own tokens, then over the "
            "completions (GRPO's per-sequence mean): a token of a short completion weighs more than one of a long "
            "one, and a micro-batch's weight does not follow its tokens",
            "sum -A log p over all the completion tokens of the window and divide once by their count (DAPO), counted "
            "before the first backward(); or loss_type='dapo' in TRL"),
    Mistake("count_all_reduced_per_micro_batch", "each micro-batch's token count is all-reduced on its own and "
            "divides only that micro-batch's loss, then the micro-batches are averaged: a token of a micro-batch with "
            "few tokens across the ranks weighs more than one of a micro-batch with many",
            "all-reduce one count per window, not per micro-batch: sum this rank's real tokens over the window's "
            "micro-batches, all-reduce that number before the first backward(), and multiply each micro-batch's token "
            "sum by world_size / it"),
    Mistake("divided_by_group_twice", "the loss is divided by the window's completion tokens and again by the group "
            "size G: every update is G x too small",
            "divide once, by the completion tokens of the window; the advantages already carry the group's "
            "normalisation"),
    Mistake("per_rank_normaliser", "each rank divides by its own window's real tokens, then DDP averages the ranks: a "
            "token on a rank with few tokens weighs more than one on a rank with many",
            "all-reduce the window's token count first and multiply each rank's token sum by world_size / that global "
            "count (DDP's mean divides by world_size again), or back-propagate sums and scale .grad by world_size / "
            "the global count after the last backward()"),
    Mistake("ranks_divided_twice", "each rank divides by the global token count, and DDP's mean over ranks divides "
            "again by world_size: every update is world_size x too small",
            "multiply each rank's token sum by world_size / the global count, not 1 / the global count"),
    Mistake("no_sync_every_micro_step", "every backward() runs inside DDP's no_sync(): the ranks' piles are never "
            "averaged, so each rank steps with its own gradient and the replicas drift apart",
            "leave the window's last backward() outside model.no_sync(), so DDP all-reduces the pile once per update"),
    Mistake("padding_counted", "the padding positions are counted in the normaliser: every token weighs too little",
            "count only the real tokens (targets != ignore_index) of the window"),
    Mistake("tail_dropped", "the uneven final window never goes through backward(): its examples never count",
            "run every batch; step after the last one too"),
    Mistake("zero_grad_missing", "the pile is not emptied after a step: gradients leak into the next update",
            "call zero_grad() after each optimizer.step()"),
    Mistake("zero_grad_before_step", "zero_grad() runs between the last backward() and optimizer.step(): the step "
            "finds the pile empty",
            "call zero_grad() after optimizer.step()"),
    Mistake("step_twice", "optimizer.step() runs twice in one update, with no backward() between",
            "call optimizer.step() once per update"),
    Mistake("clip_by_value", "clipping by value (clip_grad_value_) clamps each entry of the pile: the update no longer points along the "
            "window's gradient",
            "clip the norm instead: torch.nn.utils.clip_grad_norm_(model.parameters(), clip_norm) once, after the "
            "window's last backward()"),
    Mistake("hook_never_removed", "a hook is registered on the weights at every micro-step and never removed: each "
            "backward() runs all of them, so each micro-batch's gradient is scaled once per hook so far",
            "register the hook once, before the loop, or remove it after its backward() (handle.remove())"),
    Mistake("wrong_step_positions", "optimizer.step() runs elsewhere than at the update boundaries",
            "step after every K-th micro-step and after the last one"),
    Mistake("never_steps", "optimizer.step() is never called", "call optimizer.step() once per update"),
    Mistake("steps_by_hand", "the weights were changed by hand (p.data -= lr * p.grad, or under torch.no_grad()), "
            "never by optimizer.step(): the optimizer's own rule (momentum, Adam's moments, weight decay), its "
            "scheduler and a GradScaler are all bypassed, and no update could be checked",
            "call optimizer.step() once per update and let it change the weights"),
    Mistake("lr_scaled_instead_of_loss", "the learning rate was divided instead of the loss: .grad holds the sum of "
            "the micro-batch gradients, n x the update's mean gradient. Plain SGD's step comes out the same for a "
            "full window, but clipping, Adam's moments and weight decay see the sum, and a short last window is "
            "weighted wrong",
            "leave the learning rate as it is and weight each micro-batch's loss by its share n_i/n of the update's "
            "items before backward()"),
    Mistake("learning_rate_changed", "the loop changed the optimizer's learning rate: each update moved the weights "
            "by another step than the reference's",
            "leave the learning rate as it is: dividing the loss (n_i/n per micro-batch) is the whole of "
            "accumulation's scaling; change the rate only through the scheduler"),
    Mistake("clip_missing", "a step used an unclipped gradient although clip_norm was given",
            "clip once per update, just before optimizer.step()"),
    Mistake("clip_norm_differs", "the loop clips to another norm than the audit's clip_norm",
            "pass the max_norm your loop clips with as clip_norm"),
    Mistake("amp_clip_before_unscale", "clipping runs before scaler.unscale_(optimizer): it clips the scaled "
            "gradient, so after unscaling the update is far smaller than clip_norm allows",
            "call scaler.unscale_(optimizer) first, then clip, then scaler.step(optimizer)"),
    Mistake("amp_no_unscale", "the loop clips but never calls scaler.unscale_(optimizer): it clips the scaled "
            "gradient, and scaler.step unscales it afterwards, far below clip_norm",
            "call scaler.unscale_(optimizer) before clipping"),
    Mistake("amp_update_every_micro_step", "scaler.update() runs on a micro-step without scaler.step(): PyTorch "
            "refuses it, the scale must follow updates, not micro-steps",
            "call scaler.update() once per update, right after scaler.step(optimizer)"),
    Mistake("amp_step_twice", "scaler.step(optimizer) and optimizer.step() both run: scaler.step already steps the "
            "optimizer, so each update is applied twice",
            "call only scaler.step(optimizer)"),
    Mistake("scheduler_wrong_count", "scheduler.step() does not run once per optimizer.step()",
            "step the scheduler once per update, right after optimizer.step()"),
    Mistake("scheduler_before_step", "scheduler.step() runs before optimizer.step(): the first learning rate is "
            "skipped",
            "call it right after optimizer.step()"),
    Mistake("log_last_micro_batch", "the logged loss is the last micro-batch's, not the update's mean",
            "average the micro-batch mean losses, each weighted by its share n_i/n of the update's examples"),
    Mistake("log_plain_mean", "the logged loss is the plain mean of the micro-batch means: an example in a short "
            "micro-batch weighs more than one in a full one",
            "weight each micro-batch's mean loss by its share n_i/n of the update's examples"),
    Mistake("log_wrong", "the logged losses are not the mean loss of each update", "return one mean loss per update"),
    Mistake("bad_return_value", "the loop returned something other than a list of numbers",
            "return a list with one logged loss per update, or nothing"),
    Mistake("graphs_kept_alive", "the graphs of several micro-batches were alive at once: memory grows with K, and "
            "the saving that accumulation is for is gone",
            "call backward() on each micro-batch's loss and keep only detached numbers (loss.item() or "
            "loss.detach()); no retain_graph=True"),
    Mistake("window_in_one_pass", "the micro-batches of an update were concatenated and run in one forward and one "
            "backward pass: the whole window's activations were held at once, K x the memory accumulation exists to "
            "save",
            "run each micro-batch through its own forward and backward(), one after the other, and let .grad add them "
            "up"),
    Mistake("never_calls_backward", "no backward() pass reached the model",
            "call loss.backward() on each micro-batch's loss"),
    Mistake("backward_count", "backward() did not run once per batch", "call backward() once per micro-batch"),
    Mistake("grad_modified", ".grad was changed between backward passes inside an update",
            "leave .grad alone until the step"),
    Mistake("unexpected_gradient", "a gradient matches none of the known mistakes",
            "compare your loop line by line with the pattern"),
    Mistake("differs_from_reference", "the final weights differ from the reference for a reason not named here",
            "compare your loop line by line with the pattern"),
    Mistake("loop_raised", "the loop raised an exception", "fix the line named"),
    Mistake("time_limit", "the loop did not end within the time limit and was stopped",
            "make the loop end after one pass over batches (or raise time_limit_s)"),
    Mistake("replaced_functions", "the loop replaced functions of torch, math or Python itself while it ran: they are "
            "put back now, but what the auditor saw during the run may be off",
            "leave torch, math and the builtins as they are; change your own code instead"),
    # researcher_2's steps that belong once per update (widgets.lessons.researcher_2.once_per_update)
    Mistake("ema_every_micro_step", "the weight EMA is updated after every micro-step instead of every update",
            "update the EMA once per update, after optimizer.step()"),
    Mistake("decay_every_micro_step", "hand-written weight decay is applied after every micro-step",
            "decay the weights once per update, with the step"),
)}
MISTAKES: dict[str, Mistake] = {name: m for name, m in EVERY_MISTAKE.items() if m.label}


def _body(function: Callable) -> list[str]:
    """The lines of `function` after its signature and docstring."""
    lines = textwrap.dedent(inspect.getsource(function)).splitlines()
    start = next(i for i, line in enumerate(lines) if line.lstrip().startswith('"""'))
    end = start if lines[start].count('"""') == 2 else next(i for i in range(start + 1, len(lines)) if '"""' in lines[i])
    return lines[end + 1:]


def mistake_diff(name: str, context: int = 3) -> str:
    """The body of loop `name` (a mistake or a variant) against `train`'s, as a unified diff without headers."""
    loops = importlib.import_module("widgets.core.loops")
    if name not in (*MISTAKES, *loops.VARIANTS):
        raise ValueError(f"mistake_diff needs a mistake's name, one of {[*MISTAKES, *loops.VARIANTS]}, got {name!r}")
    return loop_diff(loops.train, getattr(loops, name), context)


def loop_diff(correct: Callable, loop: Callable, context: int = 3) -> str:
    """`loop`'s body against `correct`'s, as a unified diff without headers (lines '+', '-', ' ')."""
    diff = difflib.unified_diff(_body(correct), _body(loop), n=context, lineterm="")
    return "\n".join(line for line in diff if not line.startswith(("---", "+++", "@@")))


GALLERY = "developer_3_bug_gallery.ipynb"  # each mistake's exhibit sits under an anchor named after it
RULE = ("One rule ties them together: everything that belongs to an update (the loss's scale, the step, "
        "zero_grad, clipping, the schedule, the log) happens once per window, at the window's last micro-step.")


def mistakes_table(gallery: str | None = GALLERY) -> Table:
    """The classic mistakes: each (linked to its exhibit in `gallery`; "": here; None: no links), its symptom, its fix."""
    def name(m: Mistake) -> str:
        return m.label if gallery is None else f"[{m.label}]({gallery}#{m.name})"
    return Table(["mistake", "what you see", "the fix"], [[name(m), m.symptom, m.fix] for m in MISTAKES.values()],
                 note=RULE)
