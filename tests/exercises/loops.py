"""Learners' training loops for the tests of the gallery's `my_loop` checker (the loop auditor judges them):
one loop with a switch per choice a learner makes, each option written independently of the package."""
import torch


def make_loop(scale="share", clip="after_rescale", zero_grad="after_step", log="share", scheduler_at="update",
              backward="each", step="boundary", clip_norm=1.0):
    """The defaults are right; each other option is one correct variant or one classic mistake.

    scale:     share (loss x n_i/n) | count (loss / micro-batches in the window) | K | none |
               boundary_share (loss x n_i, .grad / n at the update) | boundary_count (.grad / micro-batches)
    clip:      after_rescale | before_rescale | every_micro_step | None
    zero_grad: after_step | window_start | every_micro_step | None
    log:       share | plain (mean of micro-batch losses) | last | divided | None
    backward:  each | window_sum (the window's losses added, one backward) | concat (one forward on the window)
    step:      boundary | every | no_tail
    """
    def my_loop(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
        K, N = accumulation_steps, len(batches)
        logged, pending, seen = [], [], []
        for i, (x, y) in enumerate(batches):
            start = i - i % K
            window = batches[start:min(start + K, N)]
            n_update, count = sum(len(t) for _, t in window), len(window)
            if zero_grad == "window_start" and i == start or zero_grad == "every_micro_step":
                optimizer.zero_grad(set_to_none=True)
            factor = {"share": len(y) / n_update, "count": 1 / count, "K": 1 / K, "none": 1.0,
                      "boundary_share": float(len(y)), "boundary_count": 1.0}[scale]
            if backward == "concat":
                if i == start:
                    xs, ys = torch.cat([a for a, _ in window]), torch.cat([b for _, b in window])
                    (loss_fn(model(xs), ys)).backward()
                loss = loss_fn(model(x).detach(), y)
            else:
                loss = loss_fn(model(x), y)
                if backward == "window_sum":
                    pending.append(loss * factor)
                    if i == start + count - 1:
                        sum(pending).backward()
                        pending = []
                else:
                    (loss * factor).backward()
            logged_part = loss.item()
            if clip == "every_micro_step":
                torch.nn.utils.clip_grad_norm_(model.parameters(), clip_norm)
            seen.append((logged_part, len(y)))
            last = i == N - 1 and step != "no_tail"
            if (step == "every") or (i + 1) % K == 0 or last:
                if clip == "before_rescale":
                    torch.nn.utils.clip_grad_norm_(model.parameters(), clip_norm)
                if scale in ("boundary_share", "boundary_count") and (step != "every" or i == start + count - 1):
                    for p in model.parameters():
                        p.grad /= n_update if scale == "boundary_share" else count
                if clip == "after_rescale":
                    torch.nn.utils.clip_grad_norm_(model.parameters(), clip_norm)
                optimizer.step()
                if scheduler is not None and scheduler_at == "update":
                    scheduler.step()
                if zero_grad == "after_step":
                    optimizer.zero_grad(set_to_none=True)
                losses, seen = seen, []
                values, sizes = [l for l, _ in losses], [n for _, n in losses]
                logged.append({
                    "share": sum(l * n for l, n in losses) / sum(sizes), "plain": sum(values) / len(values),
                    "last": values[-1], "divided": sum(l * n for l, n in losses) / sum(sizes) / len(values),
                    None: None}[log])
            if scheduler is not None and scheduler_at == "micro_step":
                scheduler.step()
        return None if log is None else logged
    return my_loop
