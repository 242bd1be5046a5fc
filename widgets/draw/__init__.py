"""Drawing: matplotlib functions that take data (records from `core`, `research`, `audit`) and an
`Axes`, draw onto it and return what they drew; plus the palette and the PNG frames the widgets show.

May import: matplotlib, torch, `widgets.core` and `widgets.research`. Never ipywidgets, and never
`widgets.controls`.
"""
