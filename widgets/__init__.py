"""Shared code of the Gradient Accumulation Lab notebooks: one folder per lesson (`lessons/`), shared parts beside.
The names below load on first use: `import widgets` (install cell, doctor) loads no torch, matplotlib or ipywidgets."""
import importlib

_PUBLIC = {
    "make_accumulation_explorer": "widgets.lessons.beginner_2.controls",
    "make_bricks_widget": "widgets.lessons.beginner_1.controls",
    "make_prediction": "widgets.controls.prediction",
    "audit_training_loop": "widgets.audit.auditor",
    "proof_exercises": "widgets.lessons.developer_1.exercises",
    "loop_exercises": "widgets.lessons.developer_2.exercises",
    "gallery_exercises": "widgets.lessons.developer_3.exercises",
    "doctor": "widgets.lab.doctor",  # why widgets don't show: widgets.doctor()
    "progress": "widgets.lab.progress",  # exercises passed so far: widgets.progress()
}
__all__ = sorted(_PUBLIC)


def on_first_use(module: str, names: dict[str, str]):
    """A module `__getattr__` that imports each of `names` from its module (name -> module) when first asked for."""
    def __getattr__(name: str):
        if name in names:
            return getattr(importlib.import_module(names[name]), name)
        raise AttributeError(f"module {module!r} has no attribute {name!r}")
    return __getattr__


__getattr__ = on_first_use(__name__, _PUBLIC)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
