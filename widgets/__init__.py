"""Shared code of the Gradient Accumulation Lab notebooks: one folder per lesson, shared parts beside.

- `lessons/<lesson>/`: what one notebook alone needs, its `__init__.py` the notebook's one import
  surface (`from widgets.lessons.researcher_7 import run_fsdp`). Its files have roles, told by name:
  `draw.py`, `controls*.py`, `exercises.py`, and compute (every other file).
- `core/`: the mechanics every lesson uses (config, accumulation, the training loop and runs).
- `lab/`: the lab's own tools (doctor, progress, presets); torch-free at import.
- `research/`: researcher compute several lessons share (tokens, DDP workers, the planner, memory).
- `audit/`: the loop auditor and its instruments.
- `exercises/`: the check/hint/solution toolkit the lessons' exercise sets are built with.
- `draw/`: the figure style, the PNG frames and the plots several lessons draw.
- `controls/`: the widgets several lessons use (the prediction box).

What each role may import, besides the standard library and its own folder (`LAYERS` in
tests/test_layers.py, quoted; the tests check every import against it, lazy ones included):

    core/             torch
    lab/              jupyter_core, core.config, core.mistakes, core.shared
    research/         torch, core
    audit/            torch, core
    exercises/        torch, core, lab, research, audit
    draw/             torch, matplotlib, PIL, core, research
    controls/         torch, matplotlib, ipywidgets, traitlets, core, lab, research, audit, exercises, draw
    lesson compute    torch, accelerate, pytorch_lightning, core, research, audit
    lesson draw       torch, matplotlib, PIL, core, research, draw, lesson compute
    lesson exercises  torch, core, lab, research, audit, exercises, lesson compute
    lesson controls   torch, matplotlib, ipywidgets, core, lab, research, audit, exercises, draw, controls, lesson compute, lesson draw, lesson exercises

So only controls import ipywidgets, only drawings and controls matplotlib, and a lesson never
imports another lesson. The names a notebook needs most are here, loaded on first use so that
`import widgets` itself imports neither matplotlib nor ipywidgets (nor torch):

    from widgets import make_accumulation_explorer, audit_training_loop, proof_exercises
"""
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


def __getattr__(name: str):
    # Lazy (PEP 562): the widget builders pull in matplotlib and ipywidgets only when asked for.
    if name in _PUBLIC:
        return getattr(importlib.import_module(_PUBLIC[name]), name)
    raise AttributeError(f"module 'widgets' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
