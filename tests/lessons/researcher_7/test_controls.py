"""Drive the pipeline explorer as a learner would: move p and m, switch the schedule, survive an error."""
import base64

import matplotlib

matplotlib.use("Agg")
import pytest  # noqa: E402

import widgets.lessons.researcher_7.controls as module  # noqa: E402
from widgets.lessons.researcher_7.controls import make_pipeline_explorer  # noqa: E402


@pytest.fixture(scope="module")
def explorer():
    return make_pipeline_explorer(stages=4, micro_batches=8, schedule="1f1b")


def test_starts_with_the_measured_bubble_and_the_formula(explorer):
    text = explorer.readout.value
    assert "bubble measured 0.273 (GPipe), 0.273 (1F1B), formula (p-1)/(m+p-1) = 0.273" in text
    assert "8 micro-batches' activations under GPipe, 4 under 1F1B" in text


def test_moving_m_and_p_redraws(explorer):
    before = explorer.image.value
    explorer.controls["micro_batches"].value = 32
    assert explorer.image.value != before and "formula (p-1)/(m+p-1) = 0.086" in explorer.readout.value
    explorer.controls["stages"].value = 1
    assert "p = 1, m = 32: bubble measured 0.000 (GPipe)" in explorer.readout.value
    explorer.controls["stages"].value, explorer.controls["micro_batches"].value = 4, 8


def test_switching_the_schedule_redraws_the_timeline(explorer):
    explorer.controls["schedule"].value = "gpipe"
    assert explorer.ax_timeline.get_title().startswith("gpipe")
    explorer.controls["schedule"].value = "1f1b"
    assert explorer.ax_timeline.get_title().startswith("1f1b")


def test_one_figure_reused(explorer):
    figure = explorer.figure
    explorer.controls["micro_batches"].value = 5
    assert explorer.figure is figure and len(figure.axes) == 2
    explorer.controls["micro_batches"].value = 8


def test_error_in_a_callback_is_shown_and_the_explorer_survives(explorer, monkeypatch):
    def broken(*args, **kwargs):
        raise ValueError("the readout is broken on purpose")
    monkeypatch.setattr(module, "pipeline_readout", broken)
    explorer.controls["micro_batches"].value = 9
    assert "broken on purpose" in explorer.errors.outputs[0]["text"]
    monkeypatch.undo()
    explorer.controls["micro_batches"].value = 10
    assert explorer.errors.outputs == () and "m = 10" in explorer.readout.value


def test_static_fallback_is_a_png_and_deterministic_text(explorer):
    bundle = explorer._repr_mimebundle_()
    data = bundle[0] if isinstance(bundle, tuple) else bundle
    assert base64.b64decode(data["image/png"]).startswith(b"\x89PNG")
    assert data["text/plain"].startswith("PipelineExplorer: p = 4")


def test_bad_input():
    with pytest.raises(ValueError, match="stages must be a whole number from 1 to 8"):
        make_pipeline_explorer(stages=9)
    with pytest.raises(ValueError, match="micro_batches must be a whole number from 1 to 32"):
        make_pipeline_explorer(micro_batches=0)
    with pytest.raises(ValueError, match="schedule must be one of"):
        make_pipeline_explorer(schedule="zb")
