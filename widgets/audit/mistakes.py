"""Every mistake the loop auditor can name: what is wrong and the fix, in words a learner reads.

Names follow the registry `widgets.core.mistakes.MISTAKES` where one applies. A `Finding` is one
mistake seen, with what was seen; `say` turns it into the sentence the report prints.
"""
from __future__ import annotations

from dataclasses import dataclass

SHARE = "weight each micro-batch's mean loss by its share n_i/n of the update's examples (1/K for K equal " \
        "micro-batches)"  # the fix wherever a loss is scaled wrong
MISTAKES: dict[str, tuple[str, str]] = {  # name -> (what is wrong, the fix)
    "loss_not_divided": ("each micro-batch's loss reaches backward() undivided: an update of n equal micro-batches is "
                         "n x too big", SHARE + " before backward()"),
    "loss_divided_twice": ("each micro-batch's loss is divided twice: an update of n equal micro-batches is 1/n of the "
                           "reference", "weight each micro-batch's mean loss once, by its share n_i/n of the update's "
                           "examples"),
    "loss_sum_reduction": ("the loss sums over the b examples of a micro-batch (reduction='sum'): updates b x too big",
                           "use the mean, or divide the summed loss by all the examples of the update"),
    "wrong_loss_scale": ("the micro-batch losses are scaled by factors other than their shares n_i/n of the "
                         "update's examples", SHARE),
    "tail_divided_by_k": ("the uneven final window is weighted 1/K per micro-batch, not by its own examples: its "
                          "update is too small", "weight each micro-batch's mean loss of the final window by its share "
                          "n_i/n of that window's examples"),
    "normalised_per_micro_batch": ("normalised per micro-batch instead of per window: each micro-batch's mean loss "
                                   "weighs the same in its update (1/n or 1/K), so an example (a token) in a short "
                                   "micro-batch weighs more than one in a long one",
                                   "weight each micro-batch's mean loss by its share n_i/n of the update's examples "
                                   "(real tokens), or sum the losses and divide by the window's count, taken before "
                                   "the first backward()"),
    "per_micro_batch_normaliser": ("each micro-batch's -A log p is divided by its own completion tokens (TRL's "
                                   "'bnpo'), then averaged over the micro-batches: a token of a short micro-batch "
                                   "weighs more than one of a long one",
                                   "sum -A log p over the tokens and divide by the completion tokens of the whole "
                                   "window (DAPO), counted before the first backward()"),
    "grpo_sequence_mean": ("each completion's -A log p is averaged over its own tokens, then over the completions "
                           "(GRPO's per-sequence mean): a token of a short completion weighs more than one of a "
                           "long one, and a micro-batch's weight does not follow its tokens",
                           "sum -A log p over all the completion tokens of the window and divide once by their "
                           "count (DAPO), counted before the first backward(); or loss_type='dapo' in TRL"),
    "count_all_reduced_per_micro_batch": ("each micro-batch's token count is all-reduced on its own and divides "
                                          "only that micro-batch's loss, then the micro-batches are averaged: a "
                                          "token of a micro-batch with few tokens across the ranks weighs more than "
                                          "one of a micro-batch with many",
                                          "all-reduce one count per window, not per micro-batch: sum this rank's "
                                          "real tokens over the window's micro-batches, all-reduce that number "
                                          "before the first backward(), and multiply each micro-batch's token sum "
                                          "by world_size / it"),
    "divided_by_group_twice": ("the loss is divided by the window's completion tokens and again by the group size G: "
                               "every update is G x too small",
                               "divide once, by the completion tokens of the window; the advantages already "
                               "carry the group's normalisation"),
    "per_rank_normaliser": ("each rank divides by its own window's real tokens, then DDP averages the ranks: a token "
                            "on a rank with few tokens weighs more than one on a rank with many",
                            "all-reduce the window's token count first and multiply each rank's token sum by "
                            "world_size / that global count (DDP's mean divides by world_size again), or back-propagate "
                            "sums and scale .grad by world_size / the global count after the last backward()"),
    "ranks_divided_twice": ("each rank divides by the global token count, and DDP's mean over ranks divides again by "
                            "world_size: every update is world_size x too small",
                            "multiply each rank's token sum by world_size / the global count, not 1 / the global "
                            "count"),
    "padding_counted": ("the padding positions are counted in the normaliser: every token weighs too little",
                        "count only the real tokens (targets != ignore_index) of the window"),
    "tail_dropped": ("the uneven final window never goes through backward(): its examples never count",
                     "run every batch; step after the last one too"),
    "zero_grad_every_micro_step": ("zero_grad() empties the pile inside an update: it keeps only the last micro-batch",
                                   "call zero_grad() only after optimizer.step()"),
    "zero_grad_missing": ("the pile is not emptied after a step: gradients leak into the next update",
                          "call zero_grad() after each optimizer.step()"),
    "zero_grad_before_step": ("zero_grad() runs between the last backward() and optimizer.step(): the step finds "
                              "the pile empty", "call zero_grad() after optimizer.step()"),
    "step_every_micro_step": ("optimizer.step() runs after every micro-step", "step only when an update is complete"),
    "step_twice": ("optimizer.step() runs twice on the same pile: the second step applies the update again",
                   "call optimizer.step() once per update"),
    "forget_final_step": ("the uneven final window never gets its optimizer.step(): its gradient is thrown away",
                          "also step on the last micro-step, e.g. with is_update_step(i, K, len(batches))"),
    "wrong_step_positions": ("optimizer.step() runs elsewhere than at the update boundaries",
                             "step after every K-th micro-step and after the last one"),
    "never_steps": ("optimizer.step() is never called", "call optimizer.step() once per update"),
    "steps_by_hand": ("the weights were changed by hand (p.data -= lr * p.grad, or under torch.no_grad()), never by "
                      "optimizer.step(): the optimizer's own rule (momentum, Adam's moments, weight decay), its "
                      "scheduler and a GradScaler are all bypassed, and no update could be checked",
                      "call optimizer.step() once per update and let it change the weights"),
    "lr_scaled_instead_of_loss": ("the learning rate was divided instead of the loss: .grad holds the sum of the "
                                  "micro-batch gradients, n x the update's mean gradient. Plain SGD's step comes out "
                                  "the same for a full window, but clipping, Adam's moments and weight decay see the "
                                  "sum, and a short last window is weighted wrong",
                                  "leave the learning rate as it is and " + "weight each micro-batch's loss by its "
                                  "share n_i/n of the update's items before backward()"),
    "learning_rate_changed": ("the loop changed the optimizer's learning rate: each update moved the weights by "
                              "another step than the reference's", "leave the learning rate as it is: dividing the "
                              "loss (n_i/n per micro-batch) is the whole of accumulation's scaling; change the rate "
                              "only through the scheduler"),
    "clip_every_micro_step": ("clipping runs on the half-built pile inside an update",
                              "clip once per update, after the last backward() and just before optimizer.step()"),
    "clip_missing": ("a step used an unclipped gradient although clip_norm was given",
                     "clip once per update, just before optimizer.step()"),
    "clip_norm_differs": ("the loop clips to another norm than the audit's clip_norm",
                          "pass the max_norm your loop clips with as clip_norm"),
    "amp_clip_before_unscale": ("clipping runs before scaler.unscale_(optimizer): it clips the scaled gradient, "
                                "so after unscaling the update is far smaller than clip_norm allows",
                                "call scaler.unscale_(optimizer) first, then clip, then scaler.step(optimizer)"),
    "amp_no_unscale": ("the loop clips but never calls scaler.unscale_(optimizer): it clips the scaled gradient, "
                       "and scaler.step unscales it afterwards, far below clip_norm",
                       "call scaler.unscale_(optimizer) before clipping"),
    "amp_update_every_micro_step": ("scaler.update() runs on a micro-step without scaler.step(): PyTorch refuses "
                                    "it, the scale must follow updates, not micro-steps",
                                    "call scaler.update() once per update, right after scaler.step(optimizer)"),
    "amp_step_twice": ("scaler.step(optimizer) and optimizer.step() both run: scaler.step already steps the "
                       "optimizer, so each update is applied twice",
                       "call only scaler.step(optimizer)"),
    "scheduler_every_micro_step": ("scheduler.step() runs every micro-step: the warmup ends K x too soon",
                                   "step the scheduler once per update, right after optimizer.step()"),
    "scheduler_wrong_count": ("scheduler.step() does not run once per optimizer.step()",
                              "step the scheduler once per update, right after optimizer.step()"),
    "scheduler_before_step": ("scheduler.step() runs before optimizer.step(): the first learning rate is skipped",
                              "call it right after optimizer.step()"),
    "log_divided_loss": ("the logged loss is the divided one",
                         "log loss.item() before dividing, each weighted by its share n_i/n of the update's examples"),
    "log_last_micro_batch": ("the logged loss is the last micro-batch's, not the update's mean",
                             "average the micro-batch mean losses, each weighted by its share n_i/n of the update's "
                             "examples"),
    "log_plain_mean": ("the logged loss is the plain mean of the micro-batch means: an example in a short "
                       "micro-batch weighs more than one in a full one",
                       "weight each micro-batch's mean loss by its share n_i/n of the update's examples"),
    "log_wrong": ("the logged losses are not the mean loss of each update", "return one mean loss per update"),
    "bad_return_value": ("the loop returned something other than a list of numbers",
                         "return a list with one logged loss per update, or nothing"),
    "graphs_kept_alive": ("the graphs of several micro-batches were alive at once: memory grows with K, and the "
                          "saving that accumulation is for is gone",
                          "call backward() on each micro-batch's loss and keep only detached numbers "
                          "(loss.item() or loss.detach()); no retain_graph=True"),
    "window_in_one_pass": ("the micro-batches of an update were concatenated and run in one forward and one backward "
                           "pass: the whole window's activations were held at once, K x the memory accumulation "
                           "exists to save", "run each micro-batch through its own forward and backward(), one after "
                           "the other, and let .grad add them up"),
    "never_calls_backward": ("no backward() pass reached the model", "call loss.backward() on each micro-batch's loss"),
    "backward_count": ("backward() did not run once per batch", "call backward() once per micro-batch"),
    "grad_modified": (".grad was changed between backward passes inside an update", "leave .grad alone until the step"),
    "unexpected_gradient": ("a gradient matches none of the known mistakes",
                            "compare your loop line by line with the pattern"),
    "differs_from_reference": ("the final weights differ from the reference for a reason not named here",
                               "compare your loop line by line with the pattern"),
    "loop_raised": ("the loop raised an exception", "fix the line named"),
    "time_limit": ("the loop did not end within the time limit and was stopped",
                   "make the loop end after one pass over batches (or raise time_limit_s)"),
    "replaced_functions": ("the loop replaced functions of torch, math or Python itself while it ran: they are put "
                           "back now, but what the auditor saw during the run may be off",
                           "leave torch, math and the builtins as they are; change your own code instead"),
}
AUDIT_MISTAKES: dict[str, str] = {name: what for name, (what, _) in MISTAKES.items()}
# PyTorch's own error messages, each explained in one sentence about an accumulation loop
TORCH_ERRORS: dict[str, str] = {  # a piece of the message -> what it means here
    "backward through the graph a second time": "a backward() ran through a graph an earlier backward() had already "
        "freed: a loss (or a running total of losses) from an earlier micro-step was backpropagated again; keep "
        "loss.item() or loss.detach() for logging, and call backward() once per micro-batch's loss",
    "does not require grad and does not have a grad_fn": "backward() was called on a loss with no graph: it was "
        "computed under torch.no_grad() or detached, so no gradient can reach the weights",
    "No inf checks were recorded prior to update": "scaler.update() ran before any scaler.step(optimizer) since the "
        "last update: the scale must be updated once per update, after scaler.step",
    "unscale_() has already been called on this optimizer": "scaler.unscale_(optimizer) ran twice in one update: "
        "call it once, after the last backward() of the update",
    "modified by an inplace operation": "the weights (or a tensor a graph saved) changed between a forward pass and "
        "its backward(): an optimizer.step() ran before the backward of a micro-batch already computed",
    "leaf Variable that requires grad is being used in an in-place operation": "the weights were changed in place "
        "outside torch.no_grad(): let the optimizer change them, or wrap the change in torch.no_grad()",
    "shapes cannot be multiplied": "a tensor of the wrong shape reached the model: pass each micro-batch's inputs "
        "as they come, (b, features)",
}


@dataclass(frozen=True)
class Finding:
    """One mistake seen: its name (a key of MISTAKES), what the auditor saw, and the fix where the
    problem words it its own way (tokens across ranks); else MISTAKES' fix."""

    name: str
    seen: str
    fix: str | None = None

    def sentence(self) -> str:
        """'What is wrong (what was seen). Fix: the fix.', code kept in its own case (optimizer.step())."""
        what, fix = MISTAKES[self.name]
        fix = self.fix or fix
        if "(" not in what.split()[0] and not what.startswith("."):
            what = what[0].upper() + what[1:]
        return f"{what} ({self.seen}). Fix: {fix}."
