"""The explorer's mistake dropdown: one mistake at a time from the registry, the settings some need,
honest notes, and a readout in plain words (beginner) or with its numbers (developer)."""
import matplotlib

matplotlib.use("Agg")
import pytest  # noqa: E402

from widgets.core.mistakes import MISTAKES  # noqa: E402
from widgets.lessons.beginner_2.controls import MAIN_MISTAKES, NO_MISTAKE, make_accumulation_explorer  # noqa: E402
from widgets.lessons.beginner_2.draw import readout_lines  # noqa: E402


def readout_text(record, notes=(), kind: str = "plain") -> str:
    return "; ".join(readout_lines(record, notes, kind))


@pytest.fixture
def explorer():
    return make_accumulation_explorer(accumulation_steps=4, micro_batch_size=4, num_updates=3, readout="detailed")


def test_the_dropdown_offers_none_then_every_mistake_of_the_registry_once(explorer):
    options = explorer.controls["mistake"].options
    assert options[0] == (NO_MISTAKE, "")
    assert [value for _, value in options[1:]] == list(dict.fromkeys((*MAIN_MISTAKES, *MISTAKES)))
    assert {label for label, _ in options[1:]} == {m.label for m in MISTAKES.values()}
    assert explorer.controls["mistake"].description == "mistake"


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
    "mistake, setting, value",
    [
        ("forget_final_step", "tail_micro_batches", 2),
        ("tail_divided_by_k", "tail_micro_batches", 1),
        ("clip_every_micro_step", "max_grad_norm", 0.1),
        ("scheduler_every_micro_step", "warmup_updates", 3),
    ],
)
def test_a_mistake_waits_for_its_setting_with_a_note_then_breaks_the_run(explorer, mistake, setting, value):
    explorer.controls["mistake"].value = mistake
    assert explorer.errors.outputs == ()
    assert explorer.record.config.mistake is None
    note = readout_text(explorer.record, explorer.notes, "detailed")
    assert f"'{MISTAKES[mistake].label}' does nothing yet" in note and setting in note
    assert "does nothing yet" in explorer.readout.value
    explorer.controls[setting].value = value
    assert explorer.record.config.mistake == mistake and explorer.notes == []
    assert not explorer.record.matches_big_batch
    # the warmup mistake leaves every gradient exact: only the learning rates say it
    broken = "learning rates match: False" if mistake == "scheduler_every_micro_step" else "gradients allclose: False"
    assert broken in explorer.readout.value
    explorer.controls["mistake"].value = ""
    assert explorer.record.matches_big_batch  # the setting alone keeps the run exact
    assert "gradients allclose: True" in explorer.readout.value and "False" not in explorer.readout.value


def test_a_mistake_that_waits_keeps_the_frame_on_show_and_its_setting_redraws(explorer, monkeypatch):
    frame, renders = explorer.image.value, []
    monkeypatch.setattr(explorer, "render", lambda full=False, render=explorer.render: renders.append(1) or render(full))
    explorer.controls["mistake"].value = "forget_final_step"  # the same run as before: the same picture
    assert renders == [] and explorer.image.value is frame and "does nothing yet" in explorer.readout.value
    explorer.controls["tail_micro_batches"].value = 2
    assert renders == [1] and explorer.image.value != frame and explorer.record.config.mistake == "forget_final_step"


def test_log_divided_loss_keeps_allclose_and_shows_the_factor(explorer):
    explorer.controls["mistake"].value = "log_divided_loss"
    text = readout_text(explorer.record, kind="detailed")
    assert "gradients allclose: True" in text and "4 x too small" in text
    assert "logged loss: 4× too small; the training itself is right ✗" in readout_text(explorer.record)


def test_loss_divided_twice_shows_one_over_k(explorer):
    explorer.controls["mistake"].value = "loss_divided_twice"
    assert "gradients allclose: False" in explorer.readout.value
    assert "update 0 applied 0.25 x the big-batch gradient" in readout_text(explorer.record, kind="detailed")
    assert "gradient: 4× too small ✗" in readout_text(explorer.record)


@pytest.mark.parametrize("mistake", list(MISTAKES))
def test_the_plain_readout_says_each_mistake_in_words_with_no_tolerance_or_scientific_notation(mistake):
    explorer = make_accumulation_explorer(accumulation_steps=4, micro_batch_size=4, num_updates=6, mistake=mistake,
                                          **{**MISTAKES[mistake].setting, **({"max_grad_norm": 0.1}
                                             if "max_grad_norm" in MISTAKES[mistake].needs else {})})
    text = readout_text(explorer.record)
    assert "✗" in text and f"mistake: {MISTAKES[mistake].label}" in text
    assert not any(word in text for word in ("rtol", "atol", "allclose", "e+", "e-0", "bytes", "float"))


def test_the_plain_readout_of_the_correct_loop():
    explorer = make_accumulation_explorer(accumulation_steps=6, micro_batch_size=2, num_updates=2)
    text = readout_text(explorer.record)
    assert "gradient: the same as the big batch's ✓" in text and "memory: 1/6 of the big batch" in text
    assert "time: 6 passes per update (the big batch: 1)" in text and "✗" not in text
    assert explorer.controls["optimizer"] not in _shown(explorer)  # the developer tier's
    detailed = make_accumulation_explorer(accumulation_steps=6, micro_batch_size=2, num_updates=2, readout="detailed")
    assert detailed.controls["optimizer"] in _shown(detailed)


def _shown(widget) -> list:
    """Every widget displayed inside `widget`, nested boxes opened."""
    children = list(getattr(widget, "children", ()))
    return children + [w for child in children for w in _shown(child)]


def test_starting_with_a_mistake_opens_the_drawer_and_needs_its_setting():
    explorer = make_accumulation_explorer(mistake="forget_final_step", tail_micro_batches=1, num_updates=2,
                                          readout="detailed")
    drawer = explorer.drawer
    assert drawer.selected_index == 0 and explorer.controls["mistake"].value == "forget_final_step"
    assert "never got its step" in readout_text(explorer.record, kind="detailed")
    with pytest.raises(ValueError, match="forget_final_step needs .*tail_micro_batches"):
        make_accumulation_explorer(mistake="forget_final_step")
    with pytest.raises(ValueError, match="max_grad_norm"):
        make_accumulation_explorer(max_grad_norm=0.7)
    with pytest.raises(ValueError, match="warmup_updates"):
        make_accumulation_explorer(warmup_updates=99)
    with pytest.raises(ValueError, match="readout must be one of"):
        make_accumulation_explorer(readout="loud")
    with pytest.raises(ValueError, match="mistake"):
        make_accumulation_explorer(mistake="loss_not_divide")


def test_clipping_control_starts_from_the_config():
    explorer = make_accumulation_explorer(max_grad_norm=0.2, warmup_updates=2, num_updates=2)
    assert explorer.controls["max_grad_norm"].label == "0.2"
    assert explorer.record.config.max_grad_norm == 0.2 and explorer.record.config.warmup_updates == 2
    assert make_accumulation_explorer(num_updates=2).controls["max_grad_norm"].label == "off"


def test_num_updates_is_checked_before_the_warmup_is_compared_with_it():
    with pytest.raises(TypeError, match="num_updates"):
        make_accumulation_explorer(num_updates="3")


def test_the_figure_is_sharp_for_the_projector_and_fits_the_column():
    import io

    from PIL import Image

    screen = Image.open(io.BytesIO(bytes(make_accumulation_explorer(num_updates=2).image.value))).size
    projector = Image.open(io.BytesIO(bytes(make_accumulation_explorer(num_updates=2, dpi=200).image.value))).size
    assert screen[0] <= 860 and projector == (2 * screen[0], 2 * screen[1])
    with pytest.raises(ValueError, match="dpi"):
        make_accumulation_explorer(dpi=72)
