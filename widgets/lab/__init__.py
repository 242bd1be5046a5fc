"""The lab's own tools for a room: `doctor` (why widgets don't show), `hosts` (Colab, Kaggle, VS Code,
... and the install cell for hosted runtimes), `progress` (exercises passed, kept in a small local
file) and `presets` (named explorer settings and share codes).

A low layer beside `core`: `exercises` records progress through it and `controls` reads presets
from it. What it may import, besides the standard library (its row of `LAYERS` in
tests/test_layers.py, quoted):

lab/              jupyter_core, core.config, core.mistakes, core.shared

core's three torch-free modules only, and jupyter_core lazily (where the doctor looks for Jupyter's
paths). Never matplotlib, ipywidgets or, at import, torch: `widgets.doctor()` must work in a
kernel where those are broken or missing, which is when it is needed.
"""
