"""developer_3, the mistake gallery: each classic mistake as a diff, its symptom, the auditor's verdict."""
from widgets.audit.auditor import audit_training_loop
from widgets.controls.prediction import make_prediction
from widgets.core.accumulation import make_model, make_regression_data
from widgets.core.config import AccumulationConfig
from widgets.core.accumulation import below
from widgets.core.loops import train
from widgets.core.mistakes import mistake_diff, MISTAKES, mistakes_table
from widgets.lessons.beginner_2.draw import mistake_symptoms
from widgets.core.training import known_torch_state
from widgets.core.training import example_order, mse, run_regimes
from widgets.core.views import Code, Diff, Table
from widgets.exercises.verdicts import verdict
from widgets.lessons.beginner_2.controls import make_accumulation_explorer
from widgets.lessons.developer_3.bug_effects import bug_effect_table, LEARNING_RATES
from widgets.lessons.developer_3.draw import still_picture
from widgets.lessons.developer_3.exercises import gallery_exercises
