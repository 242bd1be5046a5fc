"""The mechanics every tier uses: the checked config, accumulation itself, training runs, the bricks
model and the notebook catalog.

May import: torch, the standard library and other `widgets.core` modules. Never matplotlib or
ipywidgets (tests/test_layers.py checks it), so a test, a script or a worker process can use it
without a display.
"""
