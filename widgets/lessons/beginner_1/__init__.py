"""beginner_1, carrying bricks: `.grad` piling up, the bricks widget, predictions and checked exercises.

The notebook's one import surface: every name it uses comes from here, each loaded on first use.
"""
from widgets.core.surface import lazy_surface

_NAMES = {
    "make_prediction": "widgets.controls.prediction",
    "bricks_states": "widgets.lessons.beginner_1.bricks",
    "BricksState": "widgets.lessons.beginner_1.bricks",
    "describe": "widgets.lessons.beginner_1.bricks",
    "trips_table": "widgets.lessons.beginner_1.bricks",
    "MAX_BRICKS_PER_TRIP": "widgets.lessons.beginner_1.bricks",
    "MAX_TRIPS": "widgets.lessons.beginner_1.bricks",
    "make_bricks_widget": "widgets.lessons.beginner_1.controls",
    "beginner_exercises": "widgets.lessons.beginner_1.exercises",
    "beginner_predictions": "widgets.lessons.beginner_1.exercises",
}
__all__ = sorted(_NAMES)
__getattr__, __dir__ = lazy_surface(__name__, _NAMES)
