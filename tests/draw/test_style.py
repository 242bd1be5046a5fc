"""The figure style: colours that pass WCAG 2.1 AA on white with the palette's hues kept, and every
text of a styled figure at 11 pt or more."""
import colorsys
import re

import pytest
from matplotlib.figure import Figure

from widgets.draw import style
from widgets.draw.style import FONT_PT, OKABE_ITO, TEXT_COLOURS, apply_style, legend_below, new_figure

# Okabe-Ito, as published (Okabe & Ito 2008): the style's palettes are these, darkened just enough.
OKABE_ITO_PUBLISHED = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000")


def _hls(colour):
    return colorsys.rgb_to_hls(*[int(colour[i:i + 2], 16) / 255 for i in (1, 3, 5)])


def _hue(colour):
    return _hls(colour)[0]


def contrast(foreground, background="#FFFFFF"):
    """WCAG 2.1's contrast ratio of two "#RRGGBB" colours, from 1 to 21."""
    def luminance(colour):
        channels = [int(colour[i:i + 2], 16) / 255 for i in (1, 3, 5)]
        r, g, b = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
        return 0.2126 * r + 0.7152 * g + 0.0722 * b

    light, dark = sorted((luminance(foreground), luminance(background)), reverse=True)
    return (light + 0.05) / (dark + 0.05)


def darkened(colour, ratio):
    """`colour` with its HLS lightness lowered in steps of 0.005 (hue and saturation kept) until it reaches `ratio`."""
    hue, lightness, saturation = _hls(colour)
    while True:
        rgb = colorsys.hls_to_rgb(hue, max(lightness, 0.0), saturation)
        candidate = "#%02X%02X%02X" % tuple(round(c * 255) for c in rgb)
        if contrast(candidate) >= ratio or lightness <= 0:
            return candidate
        lightness -= 0.005


def test_contrast_matches_wcag_reference_values():
    assert contrast("#000000") == pytest.approx(21.0)
    assert contrast("#FFFFFF") == pytest.approx(1.0)
    assert contrast("#009E73") == pytest.approx(3.42, abs=0.01)
    assert contrast("#D55E00") == pytest.approx(3.87, abs=0.01)


@pytest.mark.parametrize("palette, ratio", [(OKABE_ITO, 3.0), (TEXT_COLOURS, 4.5)])
def test_each_palette_is_okabe_ito_darkened_just_enough(palette, ratio):
    assert palette == tuple(darkened(c, ratio) for c in OKABE_ITO_PUBLISHED)  # the constants are what it computes
    for published, colour in zip(OKABE_ITO_PUBLISHED, palette):
        assert contrast(colour) >= ratio
        if contrast(published) >= ratio:
            assert colour == published  # darkened only where needed
        elif published != "#000000":
            assert _hue(colour) == pytest.approx(_hue(published), abs=0.01)  # the same hue, darker


def test_verdicts_prompts_and_captions_are_in_text_colours():
    from widgets.controls import prediction
    from widgets.exercises.toolkit import Feedback, Status

    for guess in ("4", "5"):
        widget = prediction.make_prediction("How many?", answer=4)
        widget.commit(guess)
        assert all(contrast(c) >= 4.5 for c in re.findall(r"color:(#[0-9A-Fa-f]{6})", widget.verdict.value))
    shown = "".join(Feedback(status, "m")._repr_markdown_() for status in Status)
    assert all(contrast(c) >= 4.5 for c in re.findall(r"color:(#[0-9A-Fa-f]{6})", shown))
    html = style.verdict_list_html(["allclose: True", "allclose: False"], ("allclose",))
    assert all(contrast(c) >= 4.5 for c in re.findall(r"color:(#[0-9A-Fa-f]{6})", html))
    assert contrast(style.MUTED_TEXT) >= 4.5


def test_apply_style_raises_every_text_to_the_floor():
    figure = new_figure(6, 3)
    ax = figure.subplots()
    ax.plot([0, 1], [0, 1], label="a line")
    ax.set_title("small", fontsize=7)
    ax.set_xlabel("x", fontsize=6)
    ax.text(0.5, 0.5, "note", fontsize=5)
    ax.legend(fontsize=6)
    apply_style(figure)
    figure.canvas.draw()
    sizes = [t.get_fontsize() for t in figure.findobj(lambda a: hasattr(a, "get_fontsize") and a.get_text())]
    sizes += [label.get_fontsize() for label in ax.get_xticklabels() + ax.get_yticklabels()]
    assert sizes and min(sizes) >= FONT_PT
    assert figure.dpi >= 100


def test_legend_below_sits_under_the_axes_off_the_data():
    figure = new_figure(6, 3)
    ax = figure.subplots()
    ax.plot([0, 1], [0, 1], label="one")
    ax.plot([0, 1], [1, 0], label="two")
    legend = legend_below(ax, ncols=2)
    figure.canvas.draw()
    renderer = figure.canvas.get_renderer()
    assert legend.get_window_extent(renderer).y1 < ax.get_window_extent(renderer).y0


def test_new_figure_is_a_plain_figure_with_a_canvas():
    figure = new_figure(4, 2, layout=None)
    assert isinstance(figure, Figure) and figure.canvas is not None and figure.dpi == style.DPI


@pytest.mark.parametrize("args, name", [((0, 3), "width"), ((6, 2**20), "height"), ((6, 3, 10_000), "dpi"),
                                        ((6, 3, 100.0), "dpi"), ((True, 3), "width"), (("6", 3), "width")])
def test_new_figure_refuses_sizes_past_its_range_before_drawing(args, name):
    with pytest.raises(ValueError, match=name):
        new_figure(*args)
