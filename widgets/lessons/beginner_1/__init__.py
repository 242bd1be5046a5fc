"""beginner_1, carrying bricks: `.grad` piling up, the bricks widget, predictions and checked exercises."""
from widgets.controls.prediction import make_prediction
from widgets.lessons.beginner_1.bricks import MAX_BRICKS_PER_TRIP, MAX_TRIPS, trips_table
from widgets.lessons.beginner_1.controls import make_bricks_widget
from widgets.lessons.beginner_1.exercises import beginner_exercises, beginner_predictions
