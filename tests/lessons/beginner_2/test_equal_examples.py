"""The race at equal examples: read after the same examples, small batches use every micro-batch."""
import pytest

from widgets.core.config import AccumulationConfig
from widgets.lessons.beginner_2.equal_examples import compare_at_equal_examples


@pytest.mark.parametrize("K, b, tail", [(4, 8, 0), (3, 2, 2), (2, 5, 1)])
def test_both_runs_are_read_after_the_same_examples(K, b, tail):
    config = AccumulationConfig(accumulation_steps=K, micro_batch_size=b, num_updates=3, tail_micro_batches=tail)
    race = compare_at_equal_examples(config)
    full = [(u + 1) * K * b for u in range(3)]
    assert race.examples_seen == full + ([full[-1] + tail * b] if tail else [])
    assert len(race.accumulated) == len(race.small_every_micro_batch) == len(race.examples_seen)


def test_with_one_micro_batch_per_update_the_two_runs_are_one_run():
    """K = 1: an update is one micro-batch, so accumulating and stepping every micro-batch agree."""
    race = compare_at_equal_examples(AccumulationConfig(accumulation_steps=1, micro_batch_size=4, num_updates=5))
    assert race.small_every_micro_batch == pytest.approx(race.accumulated, rel=1e-6)


def test_small_batches_take_k_steps_for_each_update_and_so_end_elsewhere():
    race = compare_at_equal_examples(AccumulationConfig(accumulation_steps=4, micro_batch_size=8, num_updates=6))
    assert race.small_every_micro_batch[-1] != pytest.approx(race.accumulated[-1], rel=1e-3)


def test_the_mistake_is_left_out_of_the_race():
    clean = AccumulationConfig(num_updates=3)
    buggy = AccumulationConfig(num_updates=3, mistake="loss_not_divided")
    assert compare_at_equal_examples(buggy) == compare_at_equal_examples(clean)


def test_a_non_config_is_refused_by_name():
    with pytest.raises(TypeError, match="config"):
        compare_at_equal_examples({"accumulation_steps": 4})
