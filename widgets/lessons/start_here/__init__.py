"""start-here: the map of the lab, the glossary, and the bricks to touch first.

The notebook's one import surface: every name it uses comes from here, each loaded on first use.
"""
from widgets.core.surface import lazy_surface

_NAMES = {
    "AccumulationConfig": "widgets.core.config",
    "make_bricks_widget": "widgets.lessons.beginner_1.controls",
    "catalog_table": "widgets.lessons.start_here.catalog",
}
__all__ = sorted(_NAMES)
__getattr__, __dir__ = lazy_surface(__name__, _NAMES)
