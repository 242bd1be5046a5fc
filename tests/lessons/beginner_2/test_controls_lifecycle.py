"""The explorer over a session: settings trained ahead while idle, one check per change, a known
torch state whatever the learner's cells set, and no explorer left alive when its cell re-runs."""
import asyncio
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
import widgets.lessons.beginner_2.controls_ahead as ahead_module  # noqa: E402
import widgets.core.config as config_module  # noqa: E402
from widgets.lessons.beginner_2.controls import make_accumulation_explorer  # noqa: E402
from widgets.lessons.beginner_2.controls_ahead import trains_ahead_here  # noqa: E402
from widgets.core.config import AccumulationConfig  # noqa: E402


def _pixels(png: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(png)).convert("RGB"), dtype=np.int16)


def _settings(K: int, b: int, **kwargs) -> AccumulationConfig:
    return AccumulationConfig(accumulation_steps=K, micro_batch_size=b, num_updates=3, **kwargs)


@pytest.fixture
def explorer():
    return make_accumulation_explorer(accumulation_steps=4, micro_batch_size=8, num_updates=3)


def test_the_next_notch_is_trained_ahead_and_then_only_redrawn(explorer, monkeypatch):
    explorer.controls["accumulation_steps"].value = 5
    shown = explorer.image.value
    assert explorer.train_ahead() > 0
    kept = explorer.trained_settings()
    for K, b in ((6, 8), (5, 9), (5, 7), (1, 8), (16, 8)):
        assert _settings(K, b) in kept, (K, b)
    assert _settings(5, 8, mistake="loss_not_divided") in kept
    assert _settings(5, 8, optimizer="adamw") in kept
    explorer.render()  # training ahead left the shown figure as it was
    assert int(np.abs(_pixels(shown) - _pixels(explorer.image.value)).max()) == 0

    runs = []
    original = ahead_module.run_regimes
    monkeypatch.setattr(ahead_module, "run_regimes", lambda config: runs.append(config) or original(config))
    for name, value in (("accumulation_steps", 6), ("mistake", "loss_not_divided"), ("mistake", "")):
        explorer.train_ahead()  # the learner's pause
        before = len(runs)
        explorer.controls[name].value = value
        assert len(runs) == before, f"{name}={value} was trained on the slider's path"
        assert not explorer.errors.outputs, explorer.errors.outputs
        frame = _pixels(explorer.image.value)
        explorer.render(full=True)  # a background drawn ahead has the pixels of a full redraw
        assert int(np.abs(frame - _pixels(explorer.image.value)).max()) == 0, f"after {name}={value}"


def test_a_new_change_replaces_the_plan_and_training_ahead_is_bounded(explorer):
    explorer.controls["accumulation_steps"].value = 5
    assert explorer.train_ahead(max_steps=1) == 1
    explorer.controls["micro_batch_size"].value = 9
    explorer.train_ahead()
    assert _settings(5, 10) in explorer.trained_settings()
    assert len(explorer._ahead_records) <= ahead_module._RECORDS_KEPT
    assert explorer.train_ahead() == 0  # nothing left: training ahead is idempotent


def test_a_revisit_checks_nothing_and_a_new_setting_is_checked_once(explorer, monkeypatch):
    calls = []
    original = config_module.AccumulationConfig.__post_init__
    monkeypatch.setattr(config_module.AccumulationConfig, "__post_init__",
                        lambda config: calls.append(config) or original(config))
    explorer.controls["accumulation_steps"].value = 5
    assert len(calls) == 1  # the config checks itself once; nothing else checks it on the slider's path
    explorer.controls["accumulation_steps"].value = 4
    explorer.controls["accumulation_steps"].value = 5
    assert len(calls) == 1


def test_the_verdicts_hold_after_a_learner_sets_float16_and_no_grad():
    torch.set_default_dtype(torch.float16)
    torch.set_grad_enabled(False)
    try:
        explorer = make_accumulation_explorer(accumulation_steps=4, micro_batch_size=8, num_updates=3,
                                              readout="detailed")
        assert "gradients allclose: True" in explorer.readout.value
        explorer.controls["accumulation_steps"].value = 5
        explorer.train_ahead(max_steps=2)
        explorer.controls["mistake"].value = "loss_not_divided"
        assert "gradients allclose: False" in explorer.readout.value
        explorer.controls["mistake"].value = ""
        assert "gradients allclose: True" in explorer.readout.value, explorer.errors.outputs
        assert explorer.record.first_target.dtype == torch.float32
        assert torch.get_default_dtype() == torch.float16 and not torch.is_grad_enabled()  # given back
    finally:
        torch.set_default_dtype(torch.float32)
        torch.set_grad_enabled(True)


def test_in_an_event_loop_training_ahead_runs_between_events_and_stops_on_close(monkeypatch):
    monkeypatch.delenv("JUPYTERHUB_USER", raising=False)
    monkeypatch.delenv("LAB_TRAIN_AHEAD", raising=False)

    async def session():
        explorer = make_accumulation_explorer(accumulation_steps=4, micro_batch_size=8, num_updates=3)
        explorer.controls["accumulation_steps"].value = 5
        for _ in range(500):  # the loop is idle: the runs ahead happen, one per turn
            await asyncio.sleep(0.01)
            if not explorer._ahead and not explorer._frames_ahead and explorer._plan is None:
                break
        assert _settings(6, 8) in explorer.trained_settings()
        explorer.controls["accumulation_steps"].value = 6
        explorer.close()
        assert explorer._idle_call is None and not explorer._ahead
        await asyncio.sleep(0.1)
        assert not explorer.trained_settings()

    asyncio.run(session())


def test_under_jupyterhub_nothing_is_trained_in_idle_time_but_on_request(monkeypatch):
    monkeypatch.setenv("JUPYTERHUB_USER", "learner-1")  # a hub room or Binder: the cores are shared
    monkeypatch.delenv("LAB_TRAIN_AHEAD", raising=False)

    async def session():
        explorer = make_accumulation_explorer(accumulation_steps=4, micro_batch_size=8, num_updates=3)
        explorer.controls["accumulation_steps"].value = 5
        await asyncio.sleep(0.5)  # idle: a single learner's explorer would train K = 6 here
        assert explorer._idle_call is None and _settings(6, 8) not in explorer.trained_settings()
        assert explorer.train_ahead() > 0 and _settings(6, 8) in explorer.trained_settings()  # on request
        explorer.close()

    asyncio.run(session())


@pytest.mark.parametrize("environ, trains", [
    ({}, True), ({"JUPYTERHUB_USER": "a"}, False), ({"JUPYTERHUB_USER": "a", "LAB_TRAIN_AHEAD": "on"}, True),
    ({"LAB_TRAIN_AHEAD": "off"}, False), ({"LAB_TRAIN_AHEAD": " OFF "}, False),
])
def test_where_the_explorer_trains_ahead(environ, trains):
    assert trains_ahead_here(environ) is trains


def test_a_bad_train_ahead_setting_names_the_variable():
    with pytest.raises(ValueError, match="LAB_TRAIN_AHEAD must be 'on' or 'off'"):
        trains_ahead_here({"LAB_TRAIN_AHEAD": "sometimes"})


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
    assert _live_figures() <= figures + 1
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
