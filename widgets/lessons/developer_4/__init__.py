"""developer_4, your framework: the auditor on Hugging Face Accelerate and PyTorch Lightning loops.

The notebook's one import surface: every name it uses comes from here, each loaded on first use.
"""
from widgets.core.surface import lazy_surface

_NAMES = {
    "audit_training_loop": "widgets.audit.auditor",
    "accelerate_items_loop": "widgets.lessons.developer_4.accelerate_adapter",
    "accelerate_loop": "widgets.lessons.developer_4.accelerate_adapter",
    "framework_versions": "widgets.lessons.developer_4.frameworks",
    "Code": "widgets.core.views",
    "Table": "widgets.core.views",
    "verdict": "widgets.exercises.verdicts",
    "lightning_classes": "widgets.lessons.developer_4.lightning_adapter",
    "lightning_loop": "widgets.lessons.developer_4.lightning_adapter",
}
__all__ = sorted(_NAMES)
__getattr__, __dir__ = lazy_surface(__name__, _NAMES)
