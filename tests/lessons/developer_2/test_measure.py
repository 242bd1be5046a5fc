"""developer_2's measurements: each table's verdict against an oracle, and the claims its prose makes of them
beyond the one example (other warmups, other windows, other thresholds)."""
import pytest
import torch

from widgets.core import loops
from widgets.core.accumulation import make_model, make_regression_data
from widgets.core.training import linear_warmup, mse
from widgets.lessons.developer_2 import measure
from widgets.lessons.developer_2.draw import learning_rate_still
from widgets.lessons.developer_2.wall_clock import TimedRun, race_table


def _trained(loop, examples=80, **kwargs):
    model = make_model(seed=0)
    loop(model, measure.sgd(model), mse, measure.micro_batches(*make_regression_data(examples, seed=0)), 4, **kwargs)
    return model


@pytest.mark.parametrize("examples", [80, 96, 72])  # a tail of 2 micro-batches, none, one of 1
def test_big_batch_gap_passes_train_and_fails_the_divide_by_k_tail(examples):
    assert measure.big_batch_gap(_trained(loops.train, examples, max_norm=None), examples).matches
    divided = measure.big_batch_gap(_trained(loops.tail_divided_by_k, examples, max_norm=None), examples)
    assert divided.matches == (examples % 32 == 0)  # only a short last window tells them apart
    assert ("✓" in str(divided)) == divided.matches


def test_big_batch_gap_follows_the_clip_and_the_warmup():
    model = make_model(seed=0)
    optimizer = measure.sgd(model)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, linear_warmup(2))
    batches = measure.micro_batches(*make_regression_data(80, seed=0))
    loops.train(model, optimizer, mse, batches, 4, scheduler, 0.5)
    assert measure.big_batch_gap(model, warmup_updates=2, max_norm=0.5).matches
    assert not measure.big_batch_gap(model).matches  # the same model against the run without them


def test_the_last_window_table_names_only_weight_by_share_and_drop_as_exact():
    table = measure.last_window_table()
    assert [row[2] for row in table.rows] == ["✗", "✓", "✓"]
    assert "0.5000 x" in table.note and "2/4" in table.note


def test_the_stream_has_no_length_and_yields_every_example():
    loader = measure.stream_loader()
    with pytest.raises(TypeError):
        len(loader)
    assert [len(targets) for _, targets in loader] == [8] * 10


def test_the_logged_last_micro_batch_is_off_the_mean():
    line = measure.logging_gap()
    assert line.startswith("12 updates") and line.endswith("at worst")


@pytest.mark.parametrize("max_norm", [0.5, 0.2, 0.05])
def test_clipping_every_micro_step_favours_the_late_micro_batches(max_norm):
    once, every = measure.clip_table(max_norm).rows
    weights_once = [float(w) for w in once[2].split(", ")]
    weights_every = [float(w) for w in every[2].split(", ")]
    assert len(set(weights_once)) == 1  # clipped once, every micro-batch counts the same
    assert weights_every == sorted(weights_every) and weights_every[-1] > 2 * weights_every[0]
    assert once[1] == every[1] == f"{max_norm:.4f}"  # both piles end at the threshold


@pytest.mark.parametrize("warmup", [4, 8, 12, 16])
def test_a_warmup_stepped_per_micro_step_ends_k_times_too_soon(warmup):
    per_update = measure.rates_used(False, warmup, warmup + 4)
    with pytest.warns(UserWarning, match="lr_scheduler.step"):  # torch sees a step before any optimizer.step
        per_micro_step = measure.rates_used(True, warmup, warmup + 4)
    assert per_update.index(0.1) == warmup
    assert per_micro_step.index(0.1) == -(-warmup // 4)


def test_the_warmup_figure_reads_the_rates_and_torch_warns():
    rates = measure.warmup_rates()
    assert rates.full_rate_at(rates.per_update) == 8 and rates.full_rate_at(rates.per_micro_step) == 2
    assert any("before `optimizer.step()`" in w for w in rates.warned)


def test_bad_settings_are_named():
    with pytest.raises(ValueError, match="max_norm"):
        measure.clip_table(0.0)
    with pytest.raises(ValueError, match="num_updates"):
        measure.rates_used(False, 8, 10**9)


def test_the_learning_rate_still_says_its_numbers():
    still = learning_rate_still(measure.warmup_rates())
    assert "update 8" in still.alt and "update 2" in still.alt


def test_amp_unscales_once_to_the_float32_pile_and_refuses_a_second_unscale():
    table = measure.amp_window_table()
    backward = [row for row in table.rows if row[0].startswith("backward")]
    assert {row[1] for row in backward} == {"1024"}  # the scale stays put while the pile builds
    unscaled, float32 = table.rows[-1][2].replace(")", "").split(" (float32 pile: ")
    assert abs(float(unscaled) / float(float32) - 1) < 0.01  # "within a fraction of a percent"
    assert float(backward[-1][2]) > 100 * float(unscaled)  # the pile held scale x the gradient
    assert "RuntimeError" in table.note


def test_a_skipped_step_moves_the_schedule_only_in_the_loop_that_always_steps_it():
    always, checked = measure.amp_schedule_table().rows
    assert "✗ skipped, scale 512" in always[2] and "✗ skipped, scale 512" in checked[2]
    lr = [[cell.rsplit("next lr ", 1)[1] for cell in row[1:]] for row in (always, checked)]
    assert lr == [["0.040", "0.060", "0.080"], ["0.040", "0.040", "0.060"]]  # one update ahead vs in step


def test_no_scaler_loses_every_weight():
    assert "49 of 49 weights not finite" in measure.no_scaler_step()


def test_zero_grad_to_none_leaves_nothing_for_weight_decay():
    zeros, none = measure.empty_pile_table().rows
    assert float(zeros[1]) > 0 and zeros[2] > 0
    assert float(none[1]) == 0 and none[2] == 0


def test_the_race_table_reads_the_runs():
    runs = {name: TimedRun([0.0, 1.0, 2.0], [1.0, 0.5, 0.25]) for name in ("accumulated", "small_batches")}
    runs["big_batch"] = TimedRun([0.0, 0.5, 1.0], [1.0, 0.4, 0.2])
    table = race_table(runs)
    assert [row[0] for row in table.rows] == ["500.0", "1000.0", "2000.0"]
    assert table.rows[0][1:] == ["1.0000", "0.4000", "1.0000"]
    assert "2.0 x" in table.note
