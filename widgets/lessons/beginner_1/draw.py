"""Draw the bricks onto a given Axes: `draw_bricks` lays out the scene once, `update_bricks` moves its parts (the
axis limits never change, so a `FastCanvas` blits only those)."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import matplotlib.axes
from matplotlib.collections import PolyCollection
from matplotlib.patches import FancyArrow, Polygon
from matplotlib.text import Text
from matplotlib.transforms import Affine2D

from widgets.lessons.beginner_1.bricks import BricksState, count, update_rule
from widgets.draw.style import FONT_PT, MUTED_TEXT, OKABE_ITO, TEXT_COLOURS, TITLE_PT

# One colour per trip: the Okabe-Ito palette with its vermillion (the most brick-like) first.
TRIP_COLOURS = (OKABE_ITO[5], *OKABE_ITO[:5], *OKABE_ITO[6:])
DOWNSTAIRS_COLOUR = "#C9B8A4"  # not yet carried: no trip colour
BUG_COLOUR = TEXT_COLOURS[5]  # the update built from the undivided pile: vermillion at 4.5:1 for its words
PUSH_COLOUR = {True: "#404040", False: OKABE_ITO[5]}  # divided: dark grey; not divided: vermillion
BRICK_W, BRICK_H = 0.6, 0.3  # data units; the layout below holds MAX_BRICKS_PER_TRIP x MAX_TRIPS
FLOOR = 3.5  # height of the top landing
DOWNSTAIRS_X = (0.3, 6.5)
STAIRS_X = (7.0, 11.0)
PILE_X = (11.3, 15.6)
WALL_X = (16.0, 20.2)
X_LIMITS, Y_LIMITS = (0.0, 20.4), (-0.96, 7.3)  # down to the downstairs count: the key sits top left
PUSH_X, PUSH_Y, PUSH_UNIT = 11.5, 1.45, 1.0  # the push starts here; strength 1 is PUSH_UNIT long (K <= 8 fits)
FIGURE_INCHES = (8.6, 3.48)  # the scene's aspect, in whole pixels at 100 and 200 dpi (860 x 348 on screen)


@dataclass
class BricksArtists:
    """The artists `draw_bricks` made that change from one state to the next."""

    downstairs: PolyCollection
    pile: PolyCollection
    wall: PolyCollection
    push: FancyArrow  # the update's push, to scale (hidden until the wall stands)
    labels: dict[str, Text]  # "title", "downstairs", "pile", "wall", "update"

    @property
    def moving(self) -> list:
        """Everything a redraw must repaint (what `FastCanvas` is given)."""
        return [self.downstairs, self.pile, self.wall, self.push, *self.labels.values()]


def _brick(x: float, y: float, angle_deg: float = 0.0):
    """The four corners of a brick whose lower-left corner is (x, y), turned about its centre."""
    corners = [(x, y), (x + BRICK_W, y), (x + BRICK_W, y + BRICK_H), (x, y + BRICK_H)]
    return Affine2D().rotate_deg_around(x + BRICK_W / 2, y + BRICK_H / 2, angle_deg).transform(corners)


def _heap(n: int, x_range: tuple[float, float], y0: float) -> list:
    """n bricks dropped in rows from the bottom, each askew by its index (the same n, the same heap)."""
    per_row = int((x_range[1] - x_range[0]) // BRICK_W)
    bricks = []
    for i in range(n):
        row, col = divmod(i, per_row)
        in_row = min(per_row, n - row * per_row)
        x = (x_range[0] + x_range[1]) / 2 - in_row * BRICK_W / 2 + col * BRICK_W
        x += ((i * 31) % 5 - 2) * 0.02
        bricks.append(_brick(x, y0 + row * BRICK_H, ((i * 7919) % 13 - 6) * 1.6))
    return bricks


def _wall(n: int, x_range: tuple[float, float], y0: float) -> list:
    """n bricks laid neatly in courses, every other course shifted by half a brick (a running bond)."""
    per_row = int((x_range[1] - x_range[0] - BRICK_W / 2) // BRICK_W)
    bricks = []
    for i in range(n):
        row, col = divmod(i, per_row)
        x = x_range[0] + (BRICK_W / 2 if row % 2 else 0.0) + col * BRICK_W
        bricks.append(_brick(x, y0 + row * BRICK_H))
    return bricks


def _trip_colours(trips: tuple[int, ...]) -> list[str]:
    return [TRIP_COLOURS[(t - 1) % len(TRIP_COLOURS)] for t in trips]


def _draw_scene(ax: matplotlib.axes.Axes) -> None:
    """The parts that never change: ground, staircase, upper floor, and the word-to-vocabulary key."""
    ax.set_xlim(*X_LIMITS)
    ax.set_ylim(*Y_LIMITS)
    ax.set_aspect("equal")
    ax.axis("off")
    ax.plot([X_LIMITS[0], STAIRS_X[0]], [0, 0], color="0.35", linewidth=1.5)
    steps = 4
    run, rise = (STAIRS_X[1] - STAIRS_X[0]) / steps, FLOOR / steps
    outline = [(STAIRS_X[0], 0.0)]
    for k in range(steps):
        outline += [(STAIRS_X[0] + k * run, (k + 1) * rise), (STAIRS_X[0] + (k + 1) * run, (k + 1) * rise)]
    outline += [(X_LIMITS[1], FLOOR), (X_LIMITS[1], 0.0)]
    ax.add_patch(Polygon(outline, closed=True, facecolor="0.9", edgecolor="0.45", linewidth=1.2))
    ax.annotate("", xy=(STAIRS_X[1] - 0.6, FLOOR + 0.5), xytext=(STAIRS_X[0] - 0.4, 0.9),
                arrowprops=dict(arrowstyle="-|>", color="0.5", linewidth=1.2, connectionstyle="arc3,rad=-0.15"))
    # The key in plain words, under the title where no pile or wall reaches (they stay right of PILE_X[0]).
    key = "Each trip carries a few bricks up.\nThe pile at the top adds them up.\nThe wall is built once, from the whole pile."
    ax.text(X_LIMITS[0] + 0.2, Y_LIMITS[1] - 0.95, key, ha="left", va="top", fontsize=FONT_PT, color=MUTED_TEXT,
            linespacing=1.25)
    # What each place means stays fixed; only the counts below these captions move (text is what
    # costs most to draw, so the moving labels are kept short).
    ax.text(STAIRS_X[0] - 0.6, 2.2, "one trip up\n= one micro_step", ha="right", va="bottom", fontsize=FONT_PT,
            color=MUTED_TEXT)
    captions = {sum(PILE_X) / 2: "the pile: a sum", sum(WALL_X) / 2: "the wall: the update"}
    for x, caption in captions.items():
        ax.text(x, FLOOR - 0.15, caption, ha="center", va="top", fontsize=FONT_PT, color=MUTED_TEXT)
    # The right push (pile ÷ K), outlined: the update's arrow covers it exactly, or overshoots it K times.
    ax.add_patch(FancyArrow(PUSH_X, PUSH_Y, PUSH_UNIT, 0, **_ARROW, facecolor="none", edgecolor="0.35",
                            linestyle="--", linewidth=1.0, zorder=3))
    ax.text(PUSH_X - 0.15, PUSH_Y, "push", ha="right", va="center", fontsize=FONT_PT, color=MUTED_TEXT)


_ARROW = dict(width=0.22, head_width=0.55, head_length=0.35, length_includes_head=True)


def draw_bricks(state: BricksState, ax: matplotlib.axes.Axes) -> BricksArtists:
    """Draw the whole scene for `state` onto `ax` (whose limits it fixes) and return the moving parts."""
    _draw_scene(ax)
    collections = []
    for _ in range(3):
        collection = PolyCollection([], edgecolors="white", linewidths=0.8)
        ax.add_collection(collection)
        collections.append(collection)
    count_text = dict(ha="center", va="top", fontsize=FONT_PT, weight="bold")
    labels = {
        "title": ax.text(X_LIMITS[0] + 0.2, Y_LIMITS[1] - 0.2, "", ha="left", va="top", fontsize=TITLE_PT + 1,
                         weight="bold"),
        "downstairs": ax.text(sum(DOWNSTAIRS_X) / 2, -0.15, "", ha="center", va="top", fontsize=FONT_PT),
        "pile": ax.text(sum(PILE_X) / 2, FLOOR - 0.75, "", **count_text),
        "wall": ax.text(sum(WALL_X) / 2, FLOOR - 0.75, "", **count_text),
        # the pile's blame is a sum; the update pushes with the pile ÷ K (the average armful), once built
        "update": ax.text(PUSH_X, PUSH_Y - 0.45, "", ha="left", va="top", fontsize=FONT_PT),
    }
    push = FancyArrow(PUSH_X, PUSH_Y, PUSH_UNIT, 0, **_ARROW, linewidth=0, zorder=4)
    ax.add_patch(push)
    return update_bricks(state, BricksArtists(*collections, push, labels))


def as_drawn(state: BricksState) -> BricksState:
    """`state` as `update_bricks` draws it: before the wall stands there is no push, so dividing by K or not
    changes nothing on the picture (two states with the same `as_drawn` have the same pixels)."""
    return state if state.wall_built else dataclasses.replace(state, divided=True)


def update_bricks(state: BricksState, artists: BricksArtists) -> BricksArtists:
    """Move the artists `draw_bricks` made to `state`, in place; the axis limits stay as they are."""
    b, K, t = state.micro_batch_size, state.accumulation_steps, state.trip
    artists.downstairs.set_verts(_heap(state.downstairs, DOWNSTAIRS_X, 0.0))
    artists.downstairs.set_facecolor([DOWNSTAIRS_COLOUR] * state.downstairs)
    # Once the wall stands, the pile has gone into it: the same bricks are never drawn twice.
    pile_trips = () if state.wall_built else state.pile_trips
    artists.pile.set_verts(_heap(len(pile_trips), PILE_X, FLOOR))
    artists.pile.set_facecolor(_trip_colours(pile_trips))
    wall_trips = state.pile_trips if state.wall_built else ()
    artists.wall.set_verts(_wall(len(wall_trips), WALL_X, FLOOR))
    artists.wall.set_facecolor(_trip_colours(wall_trips))
    labels = artists.labels
    carried = "nothing carried yet" if t == 0 else f"+{count(b, 'brick')} carried up"
    built = ", ONE wall built (the update)" if state.wall_built else ""
    labels["title"].set_text(f"Trip {t} of {K}: {carried}{built}")
    labels["downstairs"].set_text(f"{count(state.downstairs, 'brick')} downstairs")
    pile = "all went into the wall" if state.wall_built else f"{t} x {b} = {count(state.pile, 'brick')}"
    labels["pile"].set_text(pile)
    labels["wall"].set_text(f"{K} x {b} = {count(state.wall, 'brick')}" if state.wall_built else "not built yet")
    labels["update"].set_text(update_rule(state).replace("\n", " ") if state.wall_built else "")
    labels["update"].set_color(BUG_COLOUR if state.strength > 1 else "0.2")
    # The push to scale: strength 1 (divided) covers the dashed outline, K (not divided) is K times longer.
    artists.push.set_data(x=PUSH_X, y=PUSH_Y, dx=max(state.strength, 1) * PUSH_UNIT, dy=0)
    artists.push.set_facecolor(PUSH_COLOUR[state.strength <= 1])
    artists.push.set_visible(state.wall_built)
    return artists

