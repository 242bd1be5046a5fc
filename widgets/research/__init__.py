"""Compute for the researcher tier: where accumulation is exact, where it breaks, noise and cost.

May import: torch, the standard library and `widgets.core`. Never matplotlib or ipywidgets
(tests/test_layers.py checks it): results come back as small records that `widgets.draw` plots.
"""
