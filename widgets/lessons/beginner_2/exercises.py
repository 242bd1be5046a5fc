"""Beginner notebook 2's guesses, their answers computed by the explorer's own runs (`run_regimes`), never typed."""
from __future__ import annotations

from widgets.core.config import AccumulationConfig
from widgets.core.training import run_regimes

# The wall of 32 examples, carried three ways: (K, b).
SPLITS: dict[str, tuple[int, int]] = {"1 trip of 32": (1, 32), "4 trips of 8": (4, 8), "16 trips of 2": (16, 2)}


def pile_over_big_batch(accumulation_steps: int = 4, micro_batch_size: int = 2) -> float:
    """How many times the big batch's blame the pile is, with each micro-batch's loss left undivided."""
    config = AccumulationConfig(accumulation_steps=accumulation_steps, micro_batch_size=micro_batch_size,
                                mistake="loss_not_divided")
    record = run_regimes(config)
    return round(float(record.first_pile.accumulated.norm() / record.first_target.norm()), 4)


def lowest_final_loss(num_updates: int = 8) -> str:
    """Which way of carrying the wall of 32 ends lowest ("all three the same" when they tie)."""
    final = {name: run_regimes(AccumulationConfig(accumulation_steps=K, micro_batch_size=b, num_updates=num_updates))
             .eval_loss["accumulated"][-1] for name, (K, b) in SPLITS.items()}
    tie = max(final.values()) - min(final.values()) < 1e-6  # the three runs are the same training
    return "all three the same" if tie else min(final, key=final.get)


def explorer_predictions() -> dict[str, dict]:
    """The guesses of beginner notebook 2, as keyword arguments of `make_prediction`."""
    return {
        "undivided": dict(
            question="Four micro-batches of 2, each loss NOT divided by K. How many times the big batch's "
                     "blame will the pile be?",
            answer=pile_over_big_batch,
            wrong_guesses={1: "1 would mean the four micro-batch losses still counted a quarter each; "
                              "nothing divides them now.",
                           0.25: "dividing makes the pile smaller; leaving the division out makes it bigger."},
            explanation="Each of the four micro-batch losses counts in full instead of as a quarter.",
        ),
        "splits": dict(
            question="The wall of 32 carried three ways. After 8 updates, which run has the lowest loss?",
            answer=lowest_final_loss,
            choices=[*SPLITS, "all three the same"],
            explanation="With each loss divided by K, every split gives the same updates: the model cannot tell "
                        "them apart.",
        ),
    }
