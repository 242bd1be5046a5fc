"""The losses drawings draw onto the Axes they are given and return their bars."""
import matplotlib

matplotlib.use("Agg")
import pytest  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from widgets.lessons.researcher_8.draw import draw_expert_load, draw_token_weights  # noqa: E402


def test_token_weights_scaled_to_the_token_mean():
    ax = Figure().subplots()
    bars = draw_token_weights(ax, [2, 6], {"dapo": [1 / 8, 1 / 8], "grpo": [1 / 4, 1 / 12]})
    assert set(bars) == {"dapo", "grpo"}
    assert [b.get_height() for b in bars["dapo"]] == pytest.approx([1.0, 1.0])
    assert [b.get_height() for b in bars["grpo"]] == pytest.approx([2.0, 8 / 12])
    assert bars["dapo"][0].axes is ax


def test_expert_load_stacks_domains():
    ax = Figure().subplots()
    drawn = draw_expert_load(ax, [[1.0, 0.0], [0.5, 0.5]], "global")
    assert len(drawn) == 2 and ax.get_title() == "global"
    assert drawn[1][0].get_y() == pytest.approx(0.5)  # domain 1 stacked on domain 0 at expert 0
    assert drawn[1][0].get_height() == pytest.approx(0.25)


def test_bad_input():
    with pytest.raises(TypeError, match="ax"):
        draw_expert_load(None, [[1.0]])
