"""Lazy import surfaces: a package names what it offers, and each name is imported on first use.

A lesson's `__init__.py` is that notebook's one import surface (`from widgets.lessons.beginner_2 import
...`); loading a drawing or a widget module only when a name from it is asked for keeps `import
widgets.lessons.x` light (no matplotlib, no ipywidgets) for tests, scripts and worker processes.
Pure Python: no torch at import.
"""
from __future__ import annotations

import importlib
from typing import Callable


def lazy_surface(package: str, names: dict[str, str]) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """`__getattr__` and `__dir__` for `package`, whose `names` maps each public name to the module
    defining it. A name equal to its module's last part is the module itself (`fsdp` -> `...fsdp`)."""
    def __getattr__(name: str) -> object:
        if name not in names:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module = importlib.import_module(names[name])
        return module if names[name].rsplit(".", 1)[-1] == name else getattr(module, name)

    def __dir__() -> list[str]:
        return sorted(names)

    return __getattr__, __dir__
