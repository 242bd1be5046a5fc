"""developer_1, the twenty-minute path: the correct loop and its GPU recipe, the classic mistakes, the auditor,
DDP's no_sync, the proof."""
from widgets.audit.auditor import audit_training_loop
from widgets.core.accumulation import accumulated_gradient, big_batch_gradient, make_model
from widgets.core.accumulation import below
from widgets.core.mistakes import mistakes_table
from widgets.core.views import Table
from widgets.exercises.verdicts import verdict
from widgets.lessons.developer_1.exercises import proof_exercises
from widgets.research.planner import PRESETS
