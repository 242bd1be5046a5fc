"""The lab's own tools for a room: `doctor` (why widgets don't show), `progress` (exercises
passed, kept in a small local file) and `presets` (named explorer settings and share codes).

May import: the standard library and `widgets.core.config`. Never matplotlib, ipywidgets or, at
import, torch: `widgets.doctor()` must work in a kernel where those are broken or missing, which
is when it is needed.
"""
