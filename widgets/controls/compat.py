"""ipywidgets 7 and 8, the one place where the lab's widgets meet their differences.

Colab ships ipywidgets 7.7.1; `make lab` installs 8. pyproject admits both and `make compat` runs every
notebook under each. What differs, for what the lab uses:
- Display. 8 shows a widget through `_repr_mimebundle_`, which the lab's widgets extend with a PNG and
  one line of text (the picture where no kernel runs, the line nbval compares). 7 has no
  `_repr_mimebundle_` and displays through `_ipython_display_`, which IPython asks first: the extended
  bundle would be lost. `Displayed`, mixed in before the ipywidgets base, gives 7 the path of 8.
- Tooltips. 8 has `tooltip` on every widget; 7 has `tooltip` on buttons and `description_tooltip` on
  the widgets with a description (a Play, a slider): `set_tooltip`.
- Titles of an Accordion or a Tab. 8 takes `titles=`; 7 has only `set_title`, which 8 keeps: `set_titles`.
"""
from __future__ import annotations

from typing import Sequence

import ipywidgets as W

IPYWIDGETS_MAJOR = int(W.__version__.split(".")[0])


class Displayed:
    """Mix in before the ipywidgets base (`class X(Displayed, W.VBox)`): on ipywidgets 7 the widget is
    displayed the way 8 displays it, through `_repr_mimebundle_` (which a subclass may extend with
    `super()._repr_mimebundle_(**kwargs)`). On 8 it adds nothing."""

    if IPYWIDGETS_MAJOR < 8:
        _ipython_display_ = None  # IPython skips a None here and asks _repr_mimebundle_, as under 8

        def _repr_mimebundle_(self, **kwargs):
            """What ipywidgets 8's `Widget._repr_mimebundle_` returns: the repr, and the view where a
            front end can show one."""
            plaintext = repr(self)
            if len(plaintext) > 110:
                plaintext = plaintext[:110] + "…"
            data = {"text/plain": plaintext}
            if self._view_name is not None:
                data["application/vnd.jupyter.widget-view+json"] = {
                    "version_major": 2, "version_minor": 0, "model_id": self._model_id}
                self._handle_displayed()  # 7's on_displayed callbacks (a Box's tell its children); not IPython's include/exclude
            return data

        def close(self):
            """As 8 does: a closed widget shows as its repr only."""
            super().close()
            self._repr_mimebundle_ = None


def set_tooltip(widget: W.DOMWidget, text: str) -> W.DOMWidget:
    """`widget` with `text` as its tooltip (the hover text; a button's accessible name when it shows only
    an icon), under the name its ipywidgets version takes. Returns the widget."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a string, got {type(text).__name__}")
    name = "tooltip" if widget.has_trait("tooltip") else "description_tooltip"
    if not widget.has_trait(name):
        raise TypeError(f"a {type(widget).__name__} has no tooltip under ipywidgets {W.__version__}")
    setattr(widget, name, text)
    return widget


def set_titles(container: W.Box, titles: Sequence[str]) -> W.Box:
    """`container` (an Accordion or a Tab) with `titles` on its pages, in order. Returns the container."""
    if isinstance(titles, str) or len(titles) > len(container.children):
        raise ValueError(f"titles must be a list of at most {len(container.children)} strings (one per page), "
                         f"got {titles!r}")
    for index, title in enumerate(titles):
        container.set_title(index, title)
    return container
