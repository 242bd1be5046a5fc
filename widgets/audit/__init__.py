"""The loop auditor: run a learner's loop on a tiny problem, watch it with hooks, name each mistake it made."""
from widgets.audit.auditor import AuditReport, audit_training_loop

__all__ = ["AuditReport", "audit_training_loop"]
