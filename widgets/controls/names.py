"""`Picture` and `name_picture` live in `widgets.controls.compat`; import them from there."""
from widgets.controls.compat import Picture, name_picture  # noqa: F401
