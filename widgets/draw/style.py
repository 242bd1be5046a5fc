"""The lab's one figure style: text of at least `FONT_PT` at `DPI` (2x for the projector), colours that pass WCAG 2.1 AA."""
from __future__ import annotations

import matplotlib.axes
import matplotlib.figure
import matplotlib.legend
import matplotlib.text

DPI = 100  # the screen: a figure shown at its natural width keeps its text at its point size
PROJECTOR_DPI = 2 * DPI  # the projector view: the same figure, twice the pixels, not blurred when enlarged
FONT_PT = 11  # the smallest text in any figure
TITLE_PT = 12
MAX_INCHES = 20  # a figure's largest side: new_figure refuses more before anything is drawn

# Okabe-Ito (Okabe & Ito 2008), each hue darkened until its contrast on white reaches 3:1 (lines and shapes)
# and 4.5:1 (text), WCAG 2.1 AA; tests/draw/test_style.py recomputes them from the published colours.
LINE_COLOURS = ("#0072B2", "#C58800", "#009E73", "#CC79A7", "#229DE2", "#D55E00", "#A1960D", "#000000")
TEXT_COLOURS = ("#0072B2", "#9C6C00", "#008762", "#BC4F8B", "#187CB5", "#C35600", "#80770A", "#000000")
RIGHT_TEXT, WRONG_TEXT = TEXT_COLOURS[2], TEXT_COLOURS[5]  # "✓ Correct" / "✗ Not this time"
MUTED_TEXT = "#595959"  # grey text for captions: 7:1 on white


def legend_below(ax: matplotlib.axes.Axes, ncols: int = 3, gap_pt: float = 36, **kwargs) -> matplotlib.legend.Legend:
    """A legend `gap_pt` points under the Axes (below its tick labels and x label), off the data."""
    options = dict(loc="upper center", bbox_to_anchor=(0.5, 0.0), ncols=ncols, fontsize=FONT_PT, frameon=False,
                   borderaxespad=gap_pt / FONT_PT, handlelength=1.6, handletextpad=0.4, columnspacing=0.9)
    return ax.legend(**{**options, **kwargs})


def log_gap_axes(ax: matplotlib.axes.Axes, xlabel: str, ylabel: str, scale_note: str) -> matplotlib.legend.Legend:
    """Finish a plot of relative gradient gaps: log y axis, labels, a dotted line at 1e-7 (`scale_note`), legend below."""
    ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.axhline(1e-7, color="grey", lw=0.8, ls=":", label=f"1e-7: {scale_note}")
    return legend_below(ax, ncols=2)


def apply_style(figure: matplotlib.figure.Figure) -> matplotlib.figure.Figure:
    """Raise every text of a drawn `figure` to at least `FONT_PT`; returns the figure."""
    for ax in figure.axes:
        ax.tick_params(labelsize=FONT_PT)  # also for ticks made later, when the limits change
        ax.title.set_fontsize(max(ax.title.get_fontsize(), TITLE_PT))
    for text in figure.findobj(matplotlib.text.Text):
        if text.get_fontsize() < FONT_PT:
            text.set_fontsize(FONT_PT)
    return figure


def new_figure(width: float, height: float, dpi: int = DPI, layout: str | None = "constrained") -> matplotlib.figure.Figure:
    """A plain Figure (no pyplot, nothing leaks) with a canvas; a live widget passes `layout=None` to fix its Axes."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    for name, value in (("width", width), ("height", height)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.5 <= value <= MAX_INCHES:
            raise ValueError(f"{name} must be a number of inches from 0.5 to {MAX_INCHES}, got {value!r}")
    if isinstance(dpi, bool) or not isinstance(dpi, int) or not DPI // 2 <= dpi <= 2 * PROJECTOR_DPI:
        raise ValueError(f"dpi must be a whole number from {DPI // 2} to {2 * PROJECTOR_DPI}, got {dpi!r}")
    figure = matplotlib.figure.Figure(figsize=(width, height), dpi=dpi, layout=layout)
    FigureCanvasAgg(figure)
    return figure


def freeze_layout(figure: matplotlib.figure.Figure) -> matplotlib.figure.Figure:
    """Lay `figure` out once, then keep those places: a `FastCanvas`'s cached backgrounds need Axes that stay put."""
    figure.canvas.draw()
    figure.set_layout_engine("none")
    return figure
