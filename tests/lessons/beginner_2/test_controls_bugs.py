"""The explorer's "more bugs" drawer: a checkbox per bug, the settings they need, honest notes."""
import matplotlib

matplotlib.use("Agg")
import pytest  # noqa: E402

from widgets.core.config import BUGS  # noqa: E402
from widgets.lessons.beginner_2.controls import BUG_LABELS, make_accumulation_explorer, readout_text  # noqa: E402


@pytest.fixture
def explorer():
    return make_accumulation_explorer(accumulation_steps=4, micro_batch_size=4, num_updates=3)


def test_every_bug_has_a_labelled_checkbox(explorer):
    assert set(BUG_LABELS) == set(BUGS)
    for name, label in BUG_LABELS.items():
        assert explorer.controls[name].description == f"bug: {label}"


def test_tail_slider_max_follows_k(explorer):
    tail = explorer.controls["tail_micro_batches"]
    assert tail.max == 3
    tail.value = 3
    explorer.controls["accumulation_steps"].value = 2
    assert (tail.max, tail.value) == (1, 1)
    assert explorer.record.config.tail_micro_batches == 1
    explorer.controls["accumulation_steps"].value = 1
    assert (tail.max, tail.value) == (0, 0)
    assert explorer.errors.outputs == ()


@pytest.mark.parametrize(
    "bug, setting, value",
    [
        ("forget_final_step", "tail_micro_batches", 2),
        ("tail_divided_by_k", "tail_micro_batches", 1),
        ("clip_every_micro_step", "max_grad_norm", 0.1),
        ("scheduler_every_micro_step", "warmup_updates", 3),
    ],
)
def test_a_bug_waits_for_its_setting_with_a_note_then_breaks_the_run(explorer, bug, setting, value):
    explorer.controls[bug].value = True
    assert explorer.errors.outputs == ()
    assert bug not in explorer.record.config.bugs
    note = readout_text(explorer.record, explorer.notes)
    assert f"'{BUG_LABELS[bug]}' is not applied yet" in note and setting in note
    assert "is not applied yet" in explorer.readout.value
    explorer.controls[setting].value = value
    assert bug in explorer.record.config.bugs and explorer.notes == []
    assert not explorer.record.matches_big_batch
    # the warmup bug leaves every gradient exact: only the learning rates say it
    broken = "learning rates match: False" if bug == "scheduler_every_micro_step" else "gradients allclose: False"
    assert broken in explorer.readout.value
    explorer.controls[bug].value = False
    assert explorer.record.matches_big_batch  # the setting alone keeps the run exact
    assert "gradients allclose: True" in explorer.readout.value and "False" not in explorer.readout.value


def test_log_divided_loss_keeps_allclose_and_shows_the_factor(explorer):
    explorer.controls["log_divided_loss"].value = True
    text = readout_text(explorer.record)
    assert "gradients allclose: True" in text and "4 x too small" in text


def test_loss_divided_twice_shows_one_over_k(explorer):
    explorer.controls["loss_divided_twice"].value = True
    assert "gradients allclose: False" in explorer.readout.value
    assert "update 0 applied 0.25 x the big-batch gradient" in readout_text(explorer.record)


def test_starting_with_a_new_bug_opens_the_drawer_and_needs_its_setting():
    explorer = make_accumulation_explorer(bugs={"forget_final_step"}, tail_micro_batches=1, num_updates=2)
    drawer = explorer.children[1]
    assert drawer.selected_index == 0 and explorer.controls["forget_final_step"].value
    assert "never got its step" in readout_text(explorer.record)
    with pytest.raises(ValueError, match="forget_final_step needs .*tail_micro_batches"):
        make_accumulation_explorer(bugs={"forget_final_step"})
    with pytest.raises(ValueError, match="max_grad_norm"):
        make_accumulation_explorer(max_grad_norm=0.7)
    with pytest.raises(ValueError, match="warmup_updates"):
        make_accumulation_explorer(warmup_updates=99)


def test_clipping_control_starts_from_the_config():
    explorer = make_accumulation_explorer(max_grad_norm=0.2, warmup_updates=2, num_updates=2)
    assert explorer.controls["max_grad_norm"].label == "0.2"
    assert explorer.record.config.max_grad_norm == 0.2 and explorer.record.config.warmup_updates == 2
    assert make_accumulation_explorer(num_updates=2).controls["max_grad_norm"].label == "off"


def test_readout_refuses_what_is_not_a_record():
    with pytest.raises(TypeError, match="record"):
        readout_text("record")


def test_num_updates_is_checked_before_the_warmup_is_compared_with_it():
    with pytest.raises(TypeError, match="num_updates"):
        make_accumulation_explorer(num_updates="3")
