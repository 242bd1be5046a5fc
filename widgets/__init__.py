"""Shared code of the Gradient Accumulation Lab notebooks, one folder per layer.

- `core/`: the mechanics (config, accumulation, the one training loop, bricks, catalog).
- `lab/`: the lab's own tools (doctor, progress, presets); torch-free at import.
- `research/`: compute for the researcher tier.
- `audit/`: the loop auditor, its instruments and the framework adapters.
- `exercises/`: the check/hint/solution toolkit and each notebook's exercise set.
- `draw/`: matplotlib functions that draw records onto a given Axes.
- `controls/`: the ipywidgets builders.

What each folder may import, besides the standard library and its own folder (`LAYERS` in
tests/test_layers.py, quoted; the tests check every import against it, lazy ones included):

    core/       torch
    lab/        jupyter_core, core.config, core.shared
    research/   torch, core
    audit/      torch, accelerate, pytorch_lightning, core
    exercises/  torch, core, lab, research, audit
    draw/       torch, matplotlib, PIL, core, research
    controls/   torch, matplotlib, ipywidgets, core, lab, research, audit, exercises, draw

So only `controls/` imports ipywidgets, only `draw/` and `controls/` matplotlib. The names a
notebook needs are here, loaded on first use so that `import widgets` itself imports neither
matplotlib nor ipywidgets (nor torch):

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
