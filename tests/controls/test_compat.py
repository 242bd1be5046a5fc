"""The ipywidgets 7/8 shim: a lab widget shows the same bundle under both, tooltips and titles land.

Runs under whichever ipywidgets is installed: 8 here and in CI; under 7.7.1 with `make compat`'s
Colab-like venv (`/tmp/gradient-accumulation-lab-compat/colab/bin/python -m pytest tests/controls/test_compat.py`),
which is how these were checked against 7.
"""
from __future__ import annotations

import ast
from pathlib import Path

import ipywidgets as W
import pytest
from IPython.core.formatters import DisplayFormatter

from widgets.controls.compat import IPYWIDGETS_MAJOR, Displayed, Picture, name_picture, set_titles, set_tooltip
from widgets.controls.prediction import make_prediction

PACKAGE = Path(__file__).resolve().parents[2] / "widgets"
VIEW = "application/vnd.jupyter.widget-view+json"


class Probe(Displayed, W.VBox):
    """A widget that extends its bundle the way the lab's explorers do."""

    def _repr_mimebundle_(self, **kwargs):
        bundle = super()._repr_mimebundle_(**kwargs)
        bundle["text/plain"] = "Probe: one line"
        bundle["image/png"] = "iVBORw0KGgo="
        return bundle


def shown(widget) -> dict:
    """What IPython's display machinery sends for `widget` (what a cell's last line shows)."""
    data, _ = DisplayFormatter().format(widget)
    return data


def test_the_version_is_one_the_lab_admits():
    assert IPYWIDGETS_MAJOR in (7, 8)


def test_an_extended_bundle_is_what_ipython_shows():
    probe = Probe([W.Label("x")])
    data = shown(probe)
    assert data["text/plain"] == "Probe: one line"
    assert data["image/png"] == "iVBORw0KGgo="
    assert data[VIEW]["model_id"] == probe.model_id


def test_the_bundle_takes_what_ipython_passes_it():
    probe = Probe([W.Label("x")])
    assert probe._repr_mimebundle_(include=None, exclude=None)["text/plain"] == "Probe: one line"


def test_a_plain_displayed_widget_shows_its_repr_and_view():
    class Plain(Displayed, W.HBox):
        pass

    plain = Plain([])
    data = shown(plain)
    assert data["text/plain"].startswith("Plain(")
    assert data[VIEW] == {"version_major": 2, "version_minor": 0, "model_id": plain.model_id}


def test_a_closed_widget_shows_only_its_repr():
    probe = Probe([])
    probe.close()
    data = shown(probe)
    assert VIEW not in data and "image/png" not in data


def test_the_prediction_widget_keeps_its_folded_answer():
    data = shown(make_prediction("How many trips?", answer=4))
    assert data["text/plain"].startswith("Prediction: How many trips?")
    assert "<details>" in data["text/html"] and VIEW in data


@pytest.mark.parametrize("make", [lambda: W.Button(description="go"), lambda: W.Play(description="play"),
                                  lambda: W.IntSlider(description="K")], ids=["Button", "Play", "IntSlider"])
def test_a_tooltip_lands_where_the_version_keeps_it(make):
    widget = set_tooltip(make(), "what it does")
    name = "tooltip" if widget.has_trait("tooltip") else "description_tooltip"
    assert getattr(widget, name) == "what it does"
    state = widget.get_state()
    assert state.get("tooltip", state.get("description_tooltip")) == "what it does"  # reaches the front end


def test_titles_land_on_the_pages():
    accordion = set_titles(W.Accordion([W.Label("a"), W.Label("b")]), ["first", "second"])
    assert [accordion.get_title(i) for i in range(2)] == ["first", "second"]


def test_name_picture_sets_the_text_alternative_and_returns_the_image():
    image = Picture(format="png")
    assert name_picture(image, "The bricks: 4 trips of 5") is image
    if image.has_trait("tooltip"):  # ipywidgets 8
        assert image.tooltip == "The bricks: 4 trips of 5"


def test_the_front_end_receives_an_empty_description_beside_the_tooltip():
    """ipywidgets 8's view sets the title only when `description` is "" (and fails when it is missing)."""
    state = name_picture(Picture(format="png"), "a figure").get_state()
    assert state["description"] == "" and state.get("tooltip", "a figure") == "a figure"


def _calls_and_classes():
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            yield path.relative_to(PACKAGE.parent).as_posix(), node


def test_version_dependent_arguments_go_through_the_shim():
    """`tooltip=`, `description_tooltip=` and `titles=` each work under one version only."""
    direct = [f"{path}:{node.lineno} {kw.arg}=" for path, node in _calls_and_classes() if isinstance(node, ast.Call)
              for kw in node.keywords if kw.arg in ("tooltip", "description_tooltip", "titles")]
    assert direct == []


def test_every_widget_that_extends_its_bundle_mixes_in_displayed():
    """Under ipywidgets 7 a `_repr_mimebundle_` is never asked unless `Displayed` comes first."""
    missing = []
    for path, node in _calls_and_classes():
        if isinstance(node, ast.ClassDef) and path != "widgets/controls/compat.py":
            methods = {n.name for n in node.body if isinstance(n, ast.FunctionDef)}
            bases = [ast.unparse(b) for b in node.bases]
            if "_repr_mimebundle_" in methods and any(b.startswith("W.") for b in bases) and "Displayed" not in bases:
                missing.append(f"{path}: {node.name}")
    assert missing == []
