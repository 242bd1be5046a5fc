"""Shared code of the Gradient Accumulation Lab notebooks, one folder per layer.

- `core/`: the mechanics (config, accumulation, training runs, bricks, catalog); torch only.
- `research/`: compute for the researcher tier; torch only.
- `audit/`: the loop auditor and its instruments; torch only.
- `exercises/`: the check/hint/solution toolkit and each notebook's exercise set; torch only.
- `draw/`: matplotlib functions that draw records onto a given Axes; no ipywidgets.
- `controls/`: the ipywidgets builders; the only layer that imports ipywidgets.

Imports only run downwards (controls -> draw -> core/research; audit and exercises -> core), and
tests/test_layers.py checks the rule per folder. The names a notebook needs are here, loaded on
first use so that `import widgets` itself imports neither matplotlib nor ipywidgets (nor torch):

    from widgets import make_accumulation_explorer, audit_training_loop, proof_exercises
"""
import importlib

_PUBLIC = {
    "make_accumulation_explorer": "widgets.controls.explorer",
    "make_bricks_widget": "widgets.controls.bricks_explorer",
    "make_prediction": "widgets.controls.prediction",
    "audit_training_loop": "widgets.audit.auditor",
    "proof_exercises": "widgets.exercises.developer",
    "loop_exercises": "widgets.exercises.developer",
    "gallery_exercises": "widgets.exercises.developer",
    "doctor": "widgets.lab.doctor",  # why widgets don't show: widgets.doctor()
    "progress": "widgets.lab.progress",  # exercises passed so far: widgets.progress()
}
__all__ = sorted(_PUBLIC)


def __getattr__(name: str):
    # Lazy (PEP 562): the widget builders pull in matplotlib and ipywidgets only when asked for.
    if name in _PUBLIC:
        return getattr(importlib.import_module(_PUBLIC[name]), name)
    raise AttributeError(f"module 'widgets' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
