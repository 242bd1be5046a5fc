"""Every bad configuration is refused with a message that names the parameter and its range."""
import math

import pytest

from widgets.core.config import AccumulationConfig, check_float, check_int

BAD_CONFIGS = [
    (dict(accumulation_steps=0), ValueError, "accumulation_steps"),
    (dict(accumulation_steps=-3), ValueError, "accumulation_steps"),
    (dict(accumulation_steps=2.5), TypeError, "accumulation_steps"),
    (dict(accumulation_steps="4"), TypeError, "accumulation_steps"),
    (dict(accumulation_steps=True), TypeError, "accumulation_steps"),
    (dict(micro_batch_size=0), ValueError, "micro_batch_size"),
    (dict(micro_batch_size=8.0), TypeError, "micro_batch_size"),
    (dict(micro_batch_size=None), TypeError, "micro_batch_size"),
    (dict(accumulation_steps=32, micro_batch_size=64), ValueError, "exceeds num_examples"),
    (dict(micro_batch_size=2000), ValueError, "micro_batch_size"),
    (dict(learning_rate=0), ValueError, "learning_rate"),
    (dict(learning_rate=-0.1), ValueError, "learning_rate"),
    (dict(learning_rate=math.nan), ValueError, "learning_rate"),
    (dict(learning_rate=math.inf), ValueError, "learning_rate"),
    (dict(learning_rate="fast"), TypeError, "learning_rate"),
    (dict(num_updates=0), ValueError, "num_updates"),
    (dict(tail_micro_batches=4), ValueError, "tail_micro_batches"),
    (dict(tail_micro_batches=-1), ValueError, "tail_micro_batches"),
    (dict(num_examples=0), ValueError, "num_examples"),
    (dict(seed=-1), ValueError, "seed"),
    (dict(mistake="no_such_mistake"), ValueError, "mistake"),
    (dict(mistake=42), TypeError, "mistake"),
    (dict(mistake={"loss_not_divided"}), TypeError, "one mistake"),
]


@pytest.mark.parametrize("kwargs, error, word", BAD_CONFIGS)
def test_bad_config_names_the_parameter(kwargs, error, word):
    with pytest.raises(error, match=word):
        AccumulationConfig(**kwargs)


def test_range_is_in_the_message():
    with pytest.raises(ValueError, match=r"from 1 to 1024, got 0"):
        AccumulationConfig(accumulation_steps=0)


def test_effective_batch_size_is_k_times_b():
    config = AccumulationConfig(accumulation_steps=4, micro_batch_size=8)
    assert config.effective_batch_size == 32


def test_tail_adds_one_update():
    config = AccumulationConfig(accumulation_steps=4, num_updates=3, tail_micro_batches=2)
    assert (config.total_micro_steps, config.total_updates) == (14, 4)


def test_config_is_frozen_and_hashable():
    config = AccumulationConfig(mistake="loss_not_divided")
    assert config.mistake == "loss_not_divided"
    with pytest.raises(AttributeError):
        config.accumulation_steps = 2  # type: ignore[misc]
    assert hash(config) == hash(AccumulationConfig(mistake="loss_not_divided"))


def test_checkers_accept_good_values():
    assert check_int("n", 3, 1, 5) == 3
    assert check_float("lr", 1, 0, 10) == 1.0
    assert AccumulationConfig().mistake is None


@pytest.mark.parametrize(
    "kwargs, error, word",
    [
        (dict(max_grad_norm=0), ValueError, "max_grad_norm"),
        (dict(max_grad_norm=-1.0), ValueError, "max_grad_norm"),
        (dict(max_grad_norm="1"), TypeError, "max_grad_norm"),
        (dict(warmup_updates=-1), ValueError, "warmup_updates"),
        (dict(warmup_updates=1.5), TypeError, "warmup_updates"),
    ],
)
def test_bad_clipping_and_warmup_are_refused(kwargs, error, word):
    with pytest.raises(error, match=word):
        AccumulationConfig(**kwargs)


@pytest.mark.parametrize(
    "mistake, setting",
    [
        ("forget_final_step", "tail_micro_batches"),
        ("tail_divided_by_k", "tail_micro_batches"),
        ("clip_every_micro_step", "max_grad_norm"),
        ("scheduler_every_micro_step", "warmup_updates"),
    ],
)
def test_a_mistake_without_the_setting_it_needs_says_which_setting(mistake, setting):
    with pytest.raises(ValueError, match=f"{mistake} needs .*{setting}"):
        AccumulationConfig(mistake=mistake)


def test_a_one_update_warmup_is_not_enough_for_the_scheduler_mistake():
    # update 0 runs at the schedule's first value however the scheduler is stepped
    with pytest.raises(ValueError, match="warmup_updates >= 2"):
        AccumulationConfig(mistake="scheduler_every_micro_step", warmup_updates=1)
    assert AccumulationConfig(mistake="scheduler_every_micro_step", warmup_updates=2).warmup_updates == 2
