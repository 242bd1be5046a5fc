"""Shared code of the Gradient Accumulation Lab notebooks.

Layers: compute (`config`, `accumulation`, `training`, `auditor`, `auditor_instruments`: torch
only; `bricks`, `catalog`, `exercises`: plain Python; `exercises_proof`, `exercises_loop`,
`exercises_gallery`, gathered by `developer_exercises`: the developer tier's checkers), drawing
(`figures`, `plots`, `bricks_plots`: matplotlib, drawing onto a given Axes), controls
(`explorer`, `bricks_explorer`: ipywidgets). Importing this package imports none of them;
`import widgets.training` never pulls in matplotlib or ipywidgets.
"""

__all__ = ["make_accumulation_explorer", "make_bricks_widget"]

_BUILDERS = {"make_accumulation_explorer": "widgets.explorer", "make_bricks_widget": "widgets.bricks_explorer"}


def __getattr__(name: str):
    # Lazy, so that `import widgets` stays free of matplotlib and ipywidgets.
    if name in _BUILDERS:
        import importlib

        return getattr(importlib.import_module(_BUILDERS[name]), name)
    raise AttributeError(f"module 'widgets' has no attribute {name!r}")
