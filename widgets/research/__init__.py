"""Compute for the researcher tier (tokens, DDP workers, the planner, memory): torch and `widgets.core`, no drawing."""
