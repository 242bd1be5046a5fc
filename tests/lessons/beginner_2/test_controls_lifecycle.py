"""The explorer over a session: a setting seen again shows the same picture, a known torch state
whatever the learner's cells set, and no explorer left alive when its cell re-runs."""
import gc
import io
import sys

import matplotlib

matplotlib.use("Agg")
import ipywidgets as W  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from PIL import Image  # noqa: E402

import widgets.lessons.beginner_2.controls as explorer_module  # noqa: E402
from widgets.core.config import AccumulationConfig  # noqa: E402
from widgets.core.training import run_regimes  # noqa: E402
from widgets.lessons.beginner_2.controls import make_accumulation_explorer  # noqa: E402


def _pixels(png: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(png)).convert("RGB"), dtype=np.int16)


@pytest.fixture
def explorer():
    return make_accumulation_explorer(accumulation_steps=4, micro_batch_size=8, num_updates=3)


def test_a_setting_seen_again_shows_the_same_run_and_pixels(explorer):
    """Oracle: a fresh run of the same config; and every frame equals a full redraw of its state."""
    frames = {}
    for K in (5, 6, 5, 4, 6):
        explorer.controls["accumulation_steps"].value = K
        assert not explorer.errors.outputs, explorer.errors.outputs
        fresh = run_regimes(AccumulationConfig(accumulation_steps=K, micro_batch_size=8, num_updates=3))
        assert explorer.record.eval_loss == fresh.eval_loss
        frame = _pixels(explorer.image.value)
        explorer.render(full=True)
        assert int(np.abs(frame - _pixels(explorer.image.value)).max()) == 0, f"K = {K}"
        if K in frames:
            assert int(np.abs(frame - frames[K]).max()) == 0, f"K = {K} again"
        frames[K] = frame


def test_the_verdicts_hold_after_a_learner_sets_float16_and_no_grad():
    torch.set_default_dtype(torch.float16)
    torch.set_grad_enabled(False)
    try:
        explorer = make_accumulation_explorer(accumulation_steps=4, micro_batch_size=8, num_updates=3,
                                              readout="detailed")
        assert "gradients allclose: True" in explorer.readout.value
        explorer.controls["accumulation_steps"].value = 5
        explorer.controls["mistake"].value = "loss_not_divided"
        assert "gradients allclose: False" in explorer.readout.value
        explorer.controls["mistake"].value = ""
        assert "gradients allclose: True" in explorer.readout.value, explorer.errors.outputs
        assert explorer.record.first_target.dtype == torch.float32
        assert torch.get_default_dtype() == torch.float16 and not torch.is_grad_enabled()  # given back
    finally:
        torch.set_default_dtype(torch.float32)
        torch.set_grad_enabled(True)


def _live_figures() -> int:
    gc.collect()
    return sum(type(o) is Figure for o in gc.get_objects())


@pytest.mark.filterwarnings("ignore:Widget.widgets is deprecated")
def test_re_running_the_cell_30_times_leaves_one_explorer(monkeypatch):
    monkeypatch.setattr(explorer_module, "_running_cell", lambda: "cell-7")
    figures, widgets = _live_figures(), len(W.Widget.widgets)
    first = make_accumulation_explorer(num_updates=2)
    one_explorer = len(W.Widget.widgets) - widgets
    for _ in range(29):
        last = make_accumulation_explorer(num_updates=2)
    assert first.closed and first.comm is None and not last.closed
    assert _live_figures() <= figures + 2  # the last explorer's two panels
    assert len(W.Widget.widgets) == widgets + one_explorer

    monkeypatch.setattr(explorer_module, "_running_cell", lambda: "cell-8")
    other = make_accumulation_explorer(num_updates=2)  # another cell's explorer leaves this one alone
    assert not last.closed and not other.closed
    last.close()
    other.close()
    assert len(W.Widget.widgets) == widgets


def test_the_cell_is_the_id_jupyterlab_sends_and_none_without_one(monkeypatch):
    class Kernel:
        parent: dict = {}

        def get_parent(self, channel):
            return self.parent

    class Shell:
        kernel = Kernel()

    class IPython:
        @staticmethod
        def get_ipython():
            return Shell()

    monkeypatch.setitem(sys.modules, "IPython", IPython)
    Kernel.parent = {"metadata": {"cellId": "a1b2"}, "content": {"code": "make_accumulation_explorer()"}}
    assert explorer_module._running_cell() == "a1b2"
    Kernel.parent = {"metadata": {}, "content": {"code": "make_accumulation_explorer()"}}
    assert explorer_module._running_cell() is None  # two cells may hold the same code: close nothing


def test_outside_a_kernel_nothing_is_closed_behind_the_caller():
    a = make_accumulation_explorer(num_updates=2)
    b = make_accumulation_explorer(num_updates=2)
    assert not a.closed and not b.closed
    a.close()
    b.close()
