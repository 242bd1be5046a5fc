"""The bricks analogy as data: the pile grows t·b per trip, and the wall appears only at trip K."""

import pytest

from widgets.lessons.beginner_1.bricks import (
    MAX_BRICKS_PER_TRIP,
    MAX_TRIPS,
    BricksState,
    count,
    describe,
    trips_table,
    midway,
    update_rule,
)


@pytest.mark.parametrize("b, K", [(1, 1), (5, 4), (3, 7), (MAX_BRICKS_PER_TRIP, MAX_TRIPS)])
def test_pile_grows_by_b_per_trip_and_the_wall_waits_for_trip_k(b, K):
    states = [BricksState(b, K, t) for t in range(K + 1)]
    assert [s.trip for s in states] == list(range(K + 1))
    for s in states:
        t = s.trip
        assert s.pile == t * b
        assert s.downstairs + s.pile == K * b == s.effective_batch_size  # no brick lost or made up
        assert s.wall_built == (t == K)
        assert s.wall == (K * b if t == K else 0)  # never a part-built wall
    assert sum(s.wall_built for s in states) == 1  # one update per K micro-steps


def test_each_brick_remembers_its_trip():
    assert BricksState(2, 3, 2).pile_trips == (1, 1, 2, 2)
    assert BricksState(2, 3, 0).pile_trips == ()


def test_describe_uses_both_vocabularies_and_the_numbers():
    before, after = describe(BricksState(5, 4, 2)), describe(BricksState(5, 4, 4))
    assert "2 x 5 = 10 bricks" in before and "No wall yet" in before and "Trip 2 of 4" in before
    assert "4 x 5 = 20 bricks" in after and "ONE wall" in after and "effective_batch_size" in after
    assert "update" in after and "zero_grad" in after
    assert "carries 1 brick (" in describe(BricksState(1, 2, 0))


def test_the_pile_is_a_sum_and_the_update_divides_it_by_k():
    """The pile holds K armfuls added up; the right update is their average (strength 1), the
    undivided pile is K times too strong: exactly the notebook's forgot-to-divide bug."""
    for K in range(1, MAX_TRIPS + 1):
        right, bug = BricksState(3, K, K), BricksState(3, K, K, divided=False)
        assert right.pile == bug.pile == K * 3  # the same sum either way
        assert (right.strength, bug.strength) == (1, K)
        assert BricksState(3, K, K - 1, divided=False).strength == 0  # no wall, no push yet
    assert update_rule(BricksState(5, 4, 4)) == "update = pile ÷ 4\n(the average armful)"
    assert "4x too strong" in update_rule(BricksState(5, 4, 4, divided=False))
    assert "nothing to divide" in update_rule(BricksState(5, 1, 1))


def test_describe_reconciles_the_sum_with_the_average():
    """One reading: the wall always uses every brick; the pile's blame is a sum, the push is the
    pile ÷ K; the bug uses the sum as it is, K times too strong. No optimizer is named (beginner tier)."""
    right, bug = describe(BricksState(5, 4, 4)), describe(BricksState(5, 4, 4, divided=False))
    for text in (right, bug):
        assert "ONE wall is built from all 20 bricks" in text  # never a wall of 20 ÷ 4 bricks
        assert "wall is built from the pile" not in text
    assert "a sum of 4 armfuls" in right and "pile ÷ 4" in right and "single batch of 20" in right
    assert "BUG" in bug and "4 times too strong" in bug and "never divided" in bug
    assert not any(word in text for text in (right, bug) for word in ("SGD", "AdamW", "optimizer "))
    assert "a sum" in describe(BricksState(5, 4, 2))


def test_the_trips_table_follows_the_pile_and_builds_one_wall():
    table = trips_table(5, 4)
    assert [row[1] for row in table.rows] == [0, 5, 10, 15, 20]
    assert [row[3] for row in table.rows] == ["not yet"] * 4 + [20]
    assert all(row[1] + row[2] == 20 for row in table.rows)


def test_one_trip_is_an_ordinary_small_batch_not_the_big_wall_at_once():
    text = describe(BricksState(5, 1, 1))
    assert "a batch of b = 5" in text and "smaller wall" in text and "Nothing is accumulated" in text
    assert BricksState(5, 1, 1).wall == 5  # b unchanged: the wall shrinks from 20 to 5


@pytest.mark.parametrize("K, trip, shown", [(4, 0, 2), (4, 4, 2), (4, 3, 3), (3, 0, 2), (2, 2, 1), (1, 0, 1), (8, 8, 4)])
def test_midway_is_a_growing_pile_whenever_there_is_one(K, trip, shown):
    frame = midway(BricksState(5, K, trip, divided=False))
    assert frame == BricksState(5, K, shown, divided=False)
    if K > 1:
        assert 0 < frame.trip < K and frame.pile > 0 and frame.downstairs > 0 and not frame.wall_built


def test_count_uses_the_singular_for_one():
    assert (count(1, "brick"), count(0, "brick"), count(7, "trip")) == ("1 brick", "0 bricks", "7 trips")


@pytest.mark.parametrize(
    "args, error, message",
    [
        ((0, 4, 0), ValueError, "micro_batch_size must be a whole number from 1 to 8, got 0"),
        ((9, 4, 0), ValueError, "micro_batch_size must be a whole number from 1 to 8, got 9"),
        ((2.5, 4, 0), TypeError, "micro_batch_size"),
        ((5, 0, 0), ValueError, "accumulation_steps must be a whole number from 1 to 8, got 0"),
        ((5, 9, 0), ValueError, "accumulation_steps must be a whole number from 1 to 8"),
        ((5, "4", 0), TypeError, "accumulation_steps"),
        ((5, 4, -1), ValueError, "trip must be a whole number from 0 to 4, got -1"),
        ((5, 4, 5), ValueError, "trip must be a whole number from 0 to 4, got 5"),
        ((5, 4, True), TypeError, "trip"),
        ((5, 4, 4, "no"), TypeError, "divided must be True or False"),
    ],
)
def test_bad_input_names_the_parameter_and_its_range(args, error, message):
    with pytest.raises(error, match=message):
        BricksState(*args)


@pytest.mark.parametrize("args, word", [((0, 4), "micro_batch_size"), ((4, 20), "accumulation_steps")])
def test_trips_table_checks_its_input(args, word):
    with pytest.raises(ValueError, match=word):
        trips_table(*args)


def test_state_is_frozen():
    with pytest.raises(AttributeError):
        BricksState(1, 1, 0).trip = 1  # type: ignore[misc]
