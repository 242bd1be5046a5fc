"""Drive the explorer from Python as a learner would: move controls, read the record, figure and readout."""
import base64
import io

import matplotlib

matplotlib.use("Agg")
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from PIL import Image  # noqa: E402

from widgets.lessons.beginner_2.controls import B_RANGE, K_RANGE, make_accumulation_explorer  # noqa: E402
from widgets.lessons.beginner_2.draw import readout_lines  # noqa: E402
from widgets.core.accumulation import accumulated_gradient, big_batch_gradient, compare_gradients, make_model  # noqa: E402
from widgets.core.accumulation import make_regression_data  # noqa: E402
from widgets.core.config import AccumulationConfig  # noqa: E402
from widgets.core.training import example_order, mse, run_regimes  # noqa: E402


@pytest.fixture(scope="module")
def shared_explorer():
    return make_accumulation_explorer(accumulation_steps=4, micro_batch_size=8, readout="detailed")


@pytest.fixture
def explorer(shared_explorer):
    """The module's explorer, put back to its starting controls after each test, pass or fail."""
    start = {name: control.value for name, control in shared_explorer.controls.items()}
    limits = {name: (control.min, control.max) for name, control in shared_explorer.controls.items()
              if hasattr(control, "max") and hasattr(control, "min")}
    yield shared_explorer
    for name, (low, high) in limits.items():
        shared_explorer.controls[name].max = high
        shared_explorer.controls[name].min = low
    for name, value in start.items():
        shared_explorer.controls[name].value = value



def readout_text(record, kind: str = "plain") -> str:
    return "; ".join(readout_lines(record, kind=kind))


def _pixels(png: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(png)).convert("RGB"), dtype=np.int16)


def test_moving_k_changes_the_record_image_and_readout(explorer):
    before_png = explorer.image.value
    explorer.controls["accumulation_steps"].value = 6
    assert explorer.record.config.accumulation_steps == 6
    assert explorer.record.first_pile.pile.shape[0] == 6  # one state of the pile per micro-step
    assert explorer.image.value != before_png
    assert "= 6 x 8 = 48" in explorer.readout.value


def test_moving_b_changes_the_small_batch_run_and_readout(explorer):
    before = explorer.record.eval_loss["small_batch"]
    explorer.controls["micro_batch_size"].value = 3
    assert explorer.record.eval_loss["small_batch"] != before
    assert "= 4 x 3 = 12" in explorer.readout.value


def test_choosing_a_mistake_flips_the_gradient_verdict(explorer):
    assert "gradients allclose: True" in explorer.readout.value
    explorer.controls["mistake"].value = "loss_not_divided"
    assert not explorer.record.grads_allclose
    assert "gradients allclose: False" in explorer.readout.value
    explorer.controls["mistake"].value = ""
    assert "gradients allclose: True" in explorer.readout.value


def test_error_in_a_callback_is_shown_and_the_explorer_survives(explorer):
    slider = explorer.controls["micro_batch_size"]
    slider.max = 5000  # a learner widening a slider past what the data allow
    slider.value = 4000
    assert "micro_batch_size" in explorer.errors.outputs[0]["text"]
    assert explorer.record.config.micro_batch_size == 8  # the last good setting stays shown
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
    figures = list(explorer.figures)
    for k in (2, 3, 2):
        explorer.controls["accumulation_steps"].value = k
    assert explorer.figures == figures


def test_a_blitted_frame_has_the_pixels_of_a_full_redraw(explorer):
    """The fast path pastes a cached background and draws only the moving lines: it must give the
    picture a full redraw of the same state gives, pixel for pixel."""
    explorer.controls["accumulation_steps"].value = 5
    explorer.controls["accumulation_steps"].value = 4  # limits seen before: this frame is blitted
    redraws = [canvas.full_redraws for canvas in explorer.canvases]
    explorer.render()
    assert [canvas.full_redraws for canvas in explorer.canvases] == redraws, "the frame was not blitted"
    blitted = _pixels(explorer.image.value)
    explorer.render(full=True)
    full = _pixels(explorer.image.value)
    assert blitted.shape == full.shape
    assert int(np.abs(blitted - full).max()) == 0, f"{int((blitted != full).any(axis=2).sum())} pixels differ"


@pytest.mark.parametrize(
    "kwargs, word",
    [
        (dict(accumulation_steps=0), "accumulation_steps"),
        (dict(accumulation_steps=17), "accumulation_steps"),
        (dict(micro_batch_size=65), "micro_batch_size"),
        (dict(micro_batch_size=2.0), "micro_batch_size"),
        (dict(learning_rate=0.0), "learning_rate"),
        (dict(learning_rate=11), "learning_rate"),
        (dict(mistake="loss_not_divide"), "mistake"),
    ],
)
def test_bad_starting_values_are_refused(kwargs, word):
    with pytest.raises((ValueError, TypeError), match=word):
        make_accumulation_explorer(**kwargs)


# Every K with a few b, and every b with a few K: the corners and the uneven ratios the sliders reach.
SLIDER_SETTINGS = sorted({(K, b) for K in range(K_RANGE[0], K_RANGE[1] + 1) for b in (1, 2, 5, 8, B_RANGE[1])}
                         | {(K, b) for K in (2, 3, 7, K_RANGE[1]) for b in range(B_RANGE[0], B_RANGE[1] + 1)})


@pytest.mark.slow  # a sweep of about 150 settings, 8 s: make test runs it, make check leaves it out
def test_accumulated_gradient_is_allclose_the_big_batch_across_the_sliders():
    """What the readout's verdict rests on: the first update's gradient accumulated over K
    micro-batches of b, against one pass over the same K*b draws, at the package tolerance.
    Dividing the loss passes at every setting; the undivided pile (K times it) fails at K >= 2."""
    model = make_model(seed=0)
    x, y = make_regression_data(1024, seed=0)
    draws = example_order(AccumulationConfig(accumulation_steps=K_RANGE[1], micro_batch_size=B_RANGE[1], num_updates=1))
    failures = []
    for K, b in SLIDER_SETTINGS:
        # every setting's first update draws the first K*b examples of the same seeded permutation
        xs, ys = x[draws[: K * b]], y[draws[: K * b]]
        target = big_batch_gradient(model, xs, ys, mse)
        pile = accumulated_gradient(model, xs, ys, mse, b).accumulated
        if not compare_gradients(pile, target)[1]:
            failures.append(("divided", K, b))
        if K >= 2 and compare_gradients(K * pile, target)[1]:
            failures.append(("not divided", K, b))
    assert len(SLIDER_SETTINGS) > 300 and not failures, failures[:5]


def test_every_setting_draws_a_prefix_of_one_permutation():
    """Why the test above may take the first K*b draws of one order for every (K, b)."""
    longest = example_order(AccumulationConfig(accumulation_steps=16, micro_batch_size=64, num_updates=1))
    for K, b in [(1, 1), (3, 7), (16, 5)]:
        order = example_order(AccumulationConfig(accumulation_steps=K, micro_batch_size=b, num_updates=1))
        assert torch.equal(order, longest[: K * b])


def test_readout_turns_the_record_verdicts_into_words():
    good = run_regimes(AccumulationConfig(accumulation_steps=3, micro_batch_size=5, num_updates=2))
    bad = run_regimes(AccumulationConfig(accumulation_steps=3, micro_batch_size=5, num_updates=2,
                                         mistake="loss_not_divided"))
    assert good.grads_allclose and "gradients allclose: True" in readout_text(good, kind="detailed")
    assert not bad.grads_allclose and "gradients allclose: False" in readout_text(bad, kind="detailed")
    assert torch.allclose(bad.first_pile.accumulated, 3 * bad.first_target, rtol=1e-4, atol=1e-6)


def test_only_learning_rates_differing_is_said_as_such():
    """The warmup stepped every micro-step: the gradients are exact, the learning rates are not.
    The readout must not call a 1e-7 gradient difference "allclose: False"."""
    explorer = make_accumulation_explorer(mistake="scheduler_every_micro_step", warmup_updates=6, num_updates=6)
    text = readout_text(explorer.record, kind="detailed")
    assert explorer.record.grads_allclose and not explorer.record.learning_rates_match
    assert "gradients allclose: True" in text and "allclose: False" not in text
    assert "learning rates match: False (update 0: accumulated 0.0571, big batch 0.0143)" in text
    explorer.controls["mistake"].value = ""
    assert "learning rates match: True" in readout_text(explorer.record, kind="detailed")


def test_both_runs_blowing_up_is_said_not_called_allclose():
    """At learning rate 10, K = 16, b = 64 both runs pass 1e30; their gradients stay relatively close."""
    explorer = make_accumulation_explorer(accumulation_steps=16, micro_batch_size=64, learning_rate=10.0)
    text = readout_text(explorer.record, kind="detailed")
    assert "allclose: True" not in text and "no verdict: both runs diverged" in text
    assert "the accumulated run diverged at update 0" in text


def test_the_optimizer_dropdown_switches_the_runs(explorer):
    explorer.controls["optimizer"].value = "adamw"
    assert explorer.record.config.optimizer == "adamw" and explorer.errors.outputs == ()
    assert "gradients allclose: True" in explorer.readout.value and "AdamW" in explorer.readout.value
    explorer.controls["learning_rate"].value = 0.01
    explorer.controls["mistake"].value = "loss_not_divided"
    assert "nearly cancels: at the end |w_accumulated - w_big_batch|" in readout_text(explorer.record, kind="detailed")


def test_the_call_shown_builds_the_same_picture(explorer):
    """The line under the figure is the call a learner copies: run as written, it shows the same picture."""
    import ast

    explorer.show(accumulation_steps=8, micro_batch_size=2, mistake="loss_not_divided", optimizer="adamw")
    call = explorer.call()
    assert call == ('make_accumulation_explorer(accumulation_steps=8, micro_batch_size=2, mistake="loss_not_divided", '
                    'optimizer="adamw", readout="detailed")')
    assert call in explorer.call_text.value
    keywords = ast.parse(call, mode="eval").body.keywords  # read as data: nothing in it is run
    again = make_accumulation_explorer(**{k.arg: ast.literal_eval(k.value) for k in keywords})
    assert again.record.config == explorer.record.config
    explorer.render(full=True)
    again.render(full=True)
    assert int(np.abs(_pixels(explorer.image.value) - _pixels(again.image.value)).max()) == 0
    assert make_accumulation_explorer(num_updates=2).call() == "make_accumulation_explorer(num_updates=2)"


def test_show_moves_the_controls_like_a_learner_and_refuses_what_they_cannot_show(explorer):
    explorer.show(accumulation_steps=6, tail_micro_batches=5)  # the tail's max follows K, whatever the order
    assert (explorer.controls["accumulation_steps"].value, explorer.controls["tail_micro_batches"].value) == (6, 5)
    assert explorer.record.config.tail_micro_batches == 5 and "= 6 x 8 = 48" in explorer.readout.value
    explorer.show(tail_micro_batches=0, mistake="loss_not_divided")
    assert explorer.controls["mistake"].value == "loss_not_divided" and not explorer.record.grads_allclose
    explorer.show(mistake=None)
    assert explorer.controls["mistake"].value == "" and explorer.record.grads_allclose
    shown = explorer.image.value
    for bad, error, word in ((dict(accumulation_steps=17), ValueError, "accumulation_steps"),
                             (dict(max_grad_norm=0.3), ValueError, "max_grad_norm"),
                             (dict(mistake="loss_not_divide"), ValueError, "mistake"),
                             (dict(seed=3), TypeError, "controls")):  # not a control: a new explorer's
        with pytest.raises(error, match=word):
            explorer.show(**bad)
    assert explorer.image.value is shown and explorer.controls["accumulation_steps"].value == 6  # left as it was


def test_new_limits_on_one_panel_redraw_that_panel_alone(explorer):
    """Each panel is a figure of its own: the pile's new axis limits leave the loss panel's background alone."""
    explorer.controls["accumulation_steps"].value = 7  # the pile's x axis: 4 -> 8 micro-steps
    pile, loss = (canvas.full_redraws for canvas in explorer.canvases)
    explorer.controls["accumulation_steps"].value = 12  # 8 -> 16: new limits on the pile only
    assert [canvas.full_redraws for canvas in explorer.canvases] == [pile + 1, loss]
    frame = _pixels(explorer.image.value)
    explorer.render(full=True)
    assert int(np.abs(frame - _pixels(explorer.image.value)).max()) == 0
