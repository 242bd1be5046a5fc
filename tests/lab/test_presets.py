"""Presets and the projector's address: every preset shows what it says, and an address is read as
data (a preset, or the explorer's keyword arguments), a bad one giving the default and the reason."""
import pytest

from widgets.lab.presets import PRESETS, preset, projector_settings


@pytest.mark.parametrize("name", PRESETS)
def test_preset_builds_the_explorer_with_the_verdict_it_promises(name):
    """Oracle: the three regimes the explorer trains at the preset's settings; their verdict is the preset's."""
    explorer = pytest.importorskip("widgets.lessons.beginner_2.controls")
    built = explorer.make_accumulation_explorer(**preset(name))
    assert built.record.matches_big_batch is PRESETS[name].allclose, (name, built.record.max_grad_diff)
    assert all(update is None for update in built.record.diverged_at.values())
    built.close()


def test_unknown_preset_lists_the_known_ones():
    with pytest.raises(ValueError, match="forgot-to-divide"):
        preset("forget-to-divide")


@pytest.mark.parametrize("query, env, kwargs, said", [
    ("", {}, {}, "healthy: "),
    ("token=abc", {}, {}, "healthy: "),  # the page's key is not a setting
    ("", {"LAB_PRESET": "uneven-tail"}, {"tail_micro_batches": 2}, "uneven-tail: "),
    ("preset=forgot-to-divide", {"LAB_PRESET": "uneven-tail"}, {"mistake": "loss_not_divided"}, "forgot-to-divide: "),
    ("token=abc&accumulation_steps=8&mistake=loss_not_divided", {"LAB_PRESET": "uneven-tail"},
     {"accumulation_steps": 8, "mistake": "loss_not_divided"}, "settings with accumulation_steps=8"),
    ("preset=uneven-tail&seed=3&max_grad_norm=none", {}, {"tail_micro_batches": 2, "seed": 3, "max_grad_norm": None},
     "uneven-tail with seed=3"),
    ("learning_rate=0.05&optimizer=adamw&mistake=None", {}, {"learning_rate": 0.05, "optimizer": "adamw", "mistake": None},
     "settings with"),
    ("preset=nope", {}, {}, "showing the default settings: no preset named 'nope'"),
    ("accumulation_steps=__import__('os')", {}, {}, "showing the default settings: accumulation_steps="),
    ("K=4", {}, {}, "showing the default settings: unknown setting(s) ['K']"),
])
def test_the_projector_reads_its_address_as_data(query, env, kwargs, said):
    settings, caption = projector_settings(query, env)
    assert settings == kwargs and caption.startswith(said), (settings, caption)
