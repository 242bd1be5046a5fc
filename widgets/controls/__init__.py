"""The interactive widgets: ipywidgets builders that wire controls to a compute record and a
drawing. Each `make_..._widget`/`make_..._explorer` returns a widget without displaying it.

The only layer that imports ipywidgets; nothing outside `controls` imports it
(tests/test_layers.py checks both).
"""
