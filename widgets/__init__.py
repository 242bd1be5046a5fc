"""Shared code of the Gradient Accumulation Lab notebooks.

Layers: compute (`config`, `accumulation`, `training`: torch only), drawing (`plots`:
matplotlib, takes an Axes), controls (`explorer`: ipywidgets). Importing this package
imports none of them; `import widgets.training` never pulls in matplotlib or ipywidgets.
"""

__all__ = ["make_accumulation_explorer"]


def __getattr__(name: str):
    # Lazy, so that `import widgets` stays free of matplotlib and ipywidgets.
    if name == "make_accumulation_explorer":
        from widgets.explorer import make_accumulation_explorer

        return make_accumulation_explorer
    raise AttributeError(f"module 'widgets' has no attribute {name!r}")
