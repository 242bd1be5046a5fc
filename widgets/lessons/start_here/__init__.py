"""start-here: the map of the lab, the glossary, and the bricks to touch first."""
from widgets.core.config import AccumulationConfig
from widgets.lessons.beginner_1.controls import make_bricks_widget
from widgets.lessons.start_here.catalog import catalog_table
