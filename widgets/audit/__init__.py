"""The loop auditor: run a learner's training loop on a tiny problem, watch it from outside with
hooks, and name each mistake it made against a reference computed by plain autograd.

May import: torch, the standard library and `widgets.core`. Never matplotlib or ipywidgets.

    from widgets.audit import audit_training_loop

Modules: `auditor` (the public call and its report), `outcome` (did each step use the right gradient;
the log and the schedule), `diagnosis` (which mistake: structure, then numbers),
`instruments` (the watched model, optimizer, scheduler and stream, the time limit), `problems`
(the regression, token and RL problems, audited against `widgets.core.loop.train_loop`),
`rl_problem` (the policy-gradient loss over completions), `ranks` (a loop run once per rank, its
piles averaged as DDP does), `mistakes` (every name the auditor can report, and PyTorch's error
messages explained).
"""
from widgets.audit.auditor import AuditReport, audit_training_loop

__all__ = ["AuditReport", "audit_training_loop"]
