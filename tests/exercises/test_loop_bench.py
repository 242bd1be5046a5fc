"""The loop bench on its own: the worked loop is right in every setting, with and without clipping;
dividing by the number of micro-batches agrees with n_i/n exactly when the micro-batches are equal."""
import dataclasses

import pytest
import torch

from loops import make_loop
from widgets.exercises.gallery import my_loop
from widgets.exercises.loop_bench import SETTINGS, judge, make_batches, run_on_bench, update_gradient

UNCLIPPED = [dataclasses.replace(s, clip_norm=None) for s in SETTINGS]


@pytest.mark.parametrize("setting", SETTINGS, ids=lambda s: f"K{s.accumulation_steps}")
def test_the_worked_loop_is_right_in_every_setting(setting):
    assert judge(run_on_bench(my_loop, setting)) is None


def test_a_loop_that_clips_where_the_setting_does_not_is_told_what_its_update_did():
    fault = judge(run_on_bench(make_loop(), UNCLIPPED[0]))
    assert ".grad held the right gradient, but was then multiplied by" in fault


@pytest.mark.parametrize("options", [{"clip": None}, {"clip": None, "scale": "boundary_share"},
                                     {"clip": None, "zero_grad": "group_start"}])
def test_without_clipping_the_correct_variants_pass(options):
    for setting in UNCLIPPED:
        assert judge(run_on_bench(make_loop(**options), setting)) is None


def test_dividing_by_the_number_of_micro_batches_agrees_with_the_shares_only_for_equal_sizes():
    equal, uneven = SETTINGS
    assert set(equal.sizes) == {5} and uneven.sizes[-1] == 2
    for scale in ("count", "boundary_count"):
        assert judge(run_on_bench(make_loop(scale=scale, log="plain"), equal)) is None
        assert "[5, 2]" in judge(run_on_bench(make_loop(scale=scale), uneven))


def test_clipping_acts_on_some_updates_and_not_on_others():
    for setting in SETTINGS:
        batches = make_batches(setting)
        zero = torch.zeros(1, 6, dtype=torch.float64)
        norms = [float(update_gradient(zero, [batches[j] for j in g]).norm()) for g in setting.groups]
        assert max(norms) > setting.clip_norm > min(norms)


def test_the_bench_leaves_the_random_state_alone():
    torch.manual_seed(3)
    before = torch.random.get_rng_state()
    run_on_bench(my_loop, SETTINGS[1])
    assert torch.equal(before, torch.random.get_rng_state())
