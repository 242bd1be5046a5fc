"""Drive the explorer from Python as a learner would: move controls, read the figure and readout."""
import base64

import matplotlib

matplotlib.use("Agg")
import pytest  # noqa: E402

from widgets.core.config import AccumulationConfig  # noqa: E402
from widgets.controls.explorer import (  # noqa: E402
    B_RANGE,
    K_RANGE,
    make_accumulation_explorer,
    readout_text,
)
from widgets.core.training import run_regimes  # noqa: E402


@pytest.fixture(scope="module")
def explorer():
    return make_accumulation_explorer(accumulation_steps=4, micro_batch_size=8)


def _pile_length(explorer):
    return len(explorer._pile_artists.piles[0].get_xdata())


def test_moving_k_changes_figure_data_image_and_readout(explorer):
    before_png = explorer.image.value
    explorer.controls["accumulation_steps"].value = 6
    assert _pile_length(explorer) == 7
    assert explorer.image.value != before_png
    assert "= 6 x 8 = 48" in explorer.readout.value
    explorer.controls["accumulation_steps"].value = 4


def test_moving_b_changes_loss_curves_and_readout(explorer):
    before = list(explorer._loss_lines["small_batch"].get_ydata())
    explorer.controls["micro_batch_size"].value = 3
    assert list(explorer._loss_lines["small_batch"].get_ydata()) != before
    assert "= 4 x 3 = 12" in explorer.readout.value
    explorer.controls["micro_batch_size"].value = 8


def test_bug_switch_flips_the_verdict(explorer):
    assert "allclose: True" in explorer.readout.value
    explorer.controls["loss_not_divided"].value = True
    assert "allclose: False" in explorer.readout.value
    explorer.controls["loss_not_divided"].value = False
    assert "allclose: True" in explorer.readout.value


def test_error_in_a_callback_is_shown_and_the_explorer_survives(explorer):
    slider = explorer.controls["micro_batch_size"]
    slider.max = 5000  # a learner widening a slider past what the data allow
    slider.value = 4000
    assert "micro_batch_size" in explorer.errors.outputs[0]["text"]
    slider.value = 8
    slider.max = B_RANGE[1]
    assert explorer.errors.outputs == ()
    assert "= 4 x 8 = 32" in explorer.readout.value


def test_static_fallback_and_deterministic_text(explorer):
    bundle = explorer._repr_mimebundle_()
    data = bundle[0] if isinstance(bundle, tuple) else bundle
    assert base64.b64decode(data["image/png"]).startswith(b"\x89PNG")
    assert data["text/plain"].startswith("AccumulationExplorer: effective_batch_size")
    assert "application/vnd.jupyter.widget-view+json" in data


def test_figure_is_reused_not_recreated(explorer):
    figure = explorer.figure
    for k in (2, 3, 2):
        explorer.controls["accumulation_steps"].value = k
    assert explorer.figure is figure
    explorer.controls["accumulation_steps"].value = 4


@pytest.mark.parametrize(
    "kwargs, word",
    [
        (dict(accumulation_steps=0), "accumulation_steps"),
        (dict(accumulation_steps=17), "accumulation_steps"),
        (dict(micro_batch_size=65), "micro_batch_size"),
        (dict(micro_batch_size=2.0), "micro_batch_size"),
        (dict(learning_rate=0.0), "learning_rate"),
        (dict(learning_rate=11), "learning_rate"),
        (dict(bugs=("loss_not_divide",)), "bugs"),
    ],
)
def test_bad_starting_values_are_refused(kwargs, word):
    with pytest.raises((ValueError, TypeError), match=word):
        make_accumulation_explorer(**kwargs)


def test_readout_verdict_over_every_slider_setting():
    """Bugs off: allclose for every (K, b) the sliders allow; loss not divided: never (K >= 2).

    The readout is computed from the record alone, so short runs stand in for the explorer's
    8 updates (each update compares gradients at the same weights; more updates add nothing new).
    """
    failures = []
    for K in range(K_RANGE[0], K_RANGE[1] + 1):
        for b in range(B_RANGE[0], B_RANGE[1] + 1):
            good = readout_text(run_regimes(AccumulationConfig(accumulation_steps=K, micro_batch_size=b, num_updates=1)))
            if "allclose: True" not in good:
                failures.append(("bugs off", K, b, good))
            if K >= 2:
                bad = AccumulationConfig(accumulation_steps=K, micro_batch_size=b, num_updates=1, bugs={"loss_not_divided"})
                if "allclose: False" not in readout_text(run_regimes(bad)):
                    failures.append(("loss not divided", K, b))
    assert not failures, failures[:5]
