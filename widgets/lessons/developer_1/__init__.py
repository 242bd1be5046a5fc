"""developer_1, the twenty-minute path: the correct loop, the classic mistakes, the auditor, the proof.

The notebook's one import surface: every name it uses comes from here, each loaded on first use.
"""
from widgets.core.surface import lazy_surface

_NAMES = {
    "accumulated_gradient": "widgets.core.accumulation",
    "big_batch_gradient": "widgets.core.accumulation",
    "audit_training_loop": "widgets.audit.auditor",
    "below": "widgets.core.floor",
    "mistakes_table": "widgets.core.mistakes",
    "verdict": "widgets.exercises.verdicts",
    "proof_exercises": "widgets.lessons.developer_1.exercises",
}
__all__ = sorted(_NAMES)
__getattr__, __dir__ = lazy_surface(__name__, _NAMES)
