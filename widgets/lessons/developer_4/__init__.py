"""developer_4, your framework: the auditor on Hugging Face Accelerate and PyTorch Lightning loops."""
from widgets.audit.auditor import audit_training_loop
from widgets.core.views import Code, Table
from widgets.exercises.verdicts import verdict
from widgets.lessons.developer_4.accelerate_adapter import accelerate_items_loop, accelerate_loop
from widgets.lessons.developer_4.frameworks import framework_versions
from widgets.lessons.developer_4.lightning_adapter import lightning_classes, lightning_loop
from widgets.research.references import cite, read_bib
