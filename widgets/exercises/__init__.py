"""Checked exercises: the check/hint/solution toolkit every lesson's `exercises.py` is built with."""
