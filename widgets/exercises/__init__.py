"""Checked exercises: the check/hint/solution toolkit every lesson's set is built with (`toolkit`),
the watch on backward passes (`passes`) and the audit's one-line verdict (`verdicts`). Never matplotlib or ipywidgets."""
