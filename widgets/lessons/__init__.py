"""One folder per notebook: `widgets/lessons/<lesson>/`, holding what that notebook alone needs.

Inside a lesson, files are layered by role (tests/test_layers.py checks every import):
`draw.py` draws onto a given Axes and imports no ipywidgets; `controls*.py` builds the widgets;
`exercises.py` holds the checked exercises; every other file is compute and imports neither
matplotlib nor ipywidgets. The folder's `__init__.py` is the notebook's one import surface, each
name loaded on first use:

    from widgets.lessons.researcher_7 import run_fsdp, simulate, make_pipeline_explorer

What several lessons use stays shared, outside this folder: `widgets.core`, `widgets.research`,
`widgets.audit`, `widgets.lab`, the exercise toolkit (`widgets.exercises`), the figure style and
frames (`widgets.draw`) and the prediction widget (`widgets.controls`).
"""
