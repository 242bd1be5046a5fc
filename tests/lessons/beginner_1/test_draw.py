"""The bricks drawn onto an Axes: what `draw_bricks` returns is what the picture holds."""
import pytest

from widgets.draw.style import FastCanvas, new_figure
from widgets.lessons.beginner_1.bricks import MAX_BRICKS_PER_TRIP, MAX_TRIPS, BricksState
from widgets.lessons.beginner_1.draw import X_LIMITS, Y_LIMITS, as_drawn, draw_bricks, update_bricks


def _draw(state):
    ax = new_figure(8.6, 4.09, layout=None).add_axes((0, 0, 1, 1))
    return ax, draw_bricks(state, ax)


def _counts(artists):
    """Bricks drawn downstairs, in the pile and in the wall."""
    return tuple(len(c.get_paths()) for c in (artists.downstairs, artists.pile, artists.wall))


@pytest.mark.parametrize("trip, counts", [(0, (12, 0, 0)), (1, (9, 3, 0)), (3, (3, 9, 0)), (4, (0, 0, 12))])
def test_the_pile_grows_by_b_and_only_the_last_trip_builds_the_wall(trip, counts):
    assert _counts(_draw(BricksState(3, 4, trip))[1]) == counts


@pytest.mark.parametrize("K", [1, 2, 4, 8])
def test_the_push_is_drawn_k_times_longer_when_the_pile_is_not_divided(K):
    spans = []
    for divided in (True, False):
        push = _draw(BricksState(3, K, K, divided))[1].push
        assert push.get_visible()
        spans.append(push.get_path().get_extents().width)
    assert spans[1] == pytest.approx(K * spans[0])
    assert not _draw(BricksState(3, K, K - 1, divided=False))[1].push.get_visible()  # no wall, no push


def test_the_update_label_says_divided_or_k_times_too_strong():
    labels = _draw(BricksState(5, 4, 4))[1].labels
    assert labels["update"].get_text() == "update = pile ÷ 4 (the average armful)"
    assert "4x too strong" in _draw(BricksState(5, 4, 4, divided=False))[1].labels["update"].get_text()
    assert _draw(BricksState(5, 4, 2, divided=False))[1].labels["update"].get_text() == ""


def test_the_largest_scene_fits_inside_the_fixed_limits():
    ax, artists = _draw(BricksState(MAX_BRICKS_PER_TRIP, MAX_TRIPS, MAX_TRIPS - 1))
    for trip in (MAX_TRIPS - 1, MAX_TRIPS, 0):
        update_bricks(BricksState(MAX_BRICKS_PER_TRIP, MAX_TRIPS, trip), artists)
        for collection in (artists.downstairs, artists.pile, artists.wall):
            for path in collection.get_paths():
                xs, ys = path.vertices[:, 0], path.vertices[:, 1]
                assert X_LIMITS[0] <= xs.min() and xs.max() <= X_LIMITS[1]
                assert Y_LIMITS[0] <= ys.min() and ys.max() <= Y_LIMITS[1]
    assert ax.get_xlim() == X_LIMITS and ax.get_ylim() == Y_LIMITS


@pytest.mark.parametrize("K", [1, 3, MAX_TRIPS])
def test_before_the_wall_stands_dividing_or_not_draws_the_same_pixels(K):
    ax, artists = _draw(BricksState(4, K, 0))
    canvas = FastCanvas(ax.figure, artists.moving)
    for trip in range(K + 1):
        frames = []
        for divided in (True, False):
            state = BricksState(4, K, trip, divided)
            update_bricks(state, artists)
            frames.append(canvas.png())
        if as_drawn(state) == as_drawn(BricksState(4, K, trip)):
            assert frames[0] == frames[1], trip
        else:  # the wall stands: its push shows the difference (K = 1 divides by 1, so only from K = 2)
            assert trip == K and (frames[0] != frames[1]) == (K > 1)
