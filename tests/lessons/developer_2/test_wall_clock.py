"""`race_at_equal_time`: the same training as the exact runs, timed; no timing is asserted."""
import pytest

from widgets.core.config import AccumulationConfig
from widgets.core.training import run_regimes
from widgets.lessons.developer_2.wall_clock import race_at_equal_time


def test_the_timed_runs_train_like_the_exact_ones():
    config = AccumulationConfig(accumulation_steps=4, micro_batch_size=8, num_updates=4)
    runs = race_at_equal_time(config)
    record = run_regimes(config)
    assert runs["accumulated"].loss[1:] == pytest.approx(record.eval_loss["accumulated"], rel=1e-5)
    assert runs["big_batch"].loss[1:] == pytest.approx(record.eval_loss["big_batch"], rel=1e-5)
    assert len(runs["small_batches"].loss) == 1 + 4 * 4  # one update per micro-batch
    for run in runs.values():
        assert run.seconds == sorted(run.seconds) and run.seconds[0] == 0.0
        assert run.loss_at(0.0) == run.loss[0] and run.loss_at(float("inf")) == run.loss[-1]


def test_bad_config_is_named():
    with pytest.raises(TypeError, match="config"):
        race_at_equal_time({"accumulation_steps": 4})
