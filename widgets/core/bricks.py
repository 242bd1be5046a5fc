"""The bricks analogy as data: carry b bricks per trip up the stairs, K trips, then build one wall.

bricks per trip = micro_batch_size (b), trips = accumulation_steps (K), the pile at the top =
the accumulated gradient in `.grad`, bricks in the wall = effective_batch_size (K·b), building
the wall = the update (`optimizer.step()`). Pure Python: no torch, matplotlib or ipywidgets.
"""
from __future__ import annotations

from dataclasses import dataclass

from widgets.core.config import check_int

# Slider ranges of the bricks widget: the picture is laid out to hold up to 8 x 8 = 64 bricks.
MAX_BRICKS_PER_TRIP = 8
MAX_TRIPS = 8


@dataclass(frozen=True)
class BricksState:
    """The staircase after `trip` of `accumulation_steps` trips (0 = nothing carried yet)."""

    micro_batch_size: int  # b: bricks carried per trip
    accumulation_steps: int  # K: trips before the wall is built
    trip: int  # trips done so far, 0..K

    def __post_init__(self) -> None:
        check_int("micro_batch_size", self.micro_batch_size, 1, MAX_BRICKS_PER_TRIP)
        check_int("accumulation_steps", self.accumulation_steps, 1, MAX_TRIPS)
        check_int("trip", self.trip, 0, self.accumulation_steps)

    @property
    def effective_batch_size(self) -> int:
        """K·b: the bricks the finished wall is made of."""
        return self.accumulation_steps * self.micro_batch_size

    @property
    def pile(self) -> int:
        """Bricks carried up so far, t·b: the accumulated gradient after t micro-steps."""
        return self.trip * self.micro_batch_size

    @property
    def downstairs(self) -> int:
        """Bricks still waiting at the bottom of the stairs."""
        return self.effective_batch_size - self.pile

    @property
    def wall_built(self) -> bool:
        """The wall goes up only after the last trip: one update per K micro-steps, never sooner."""
        return self.trip == self.accumulation_steps

    @property
    def wall(self) -> int:
        """Bricks in the wall: all K·b after the last trip, none before (no quarter-walls)."""
        return self.effective_batch_size if self.wall_built else 0

    @property
    def pile_trips(self) -> tuple[int, ...]:
        """For each brick in the pile, the trip (1..t) that carried it, in carrying order."""
        return tuple(t for t in range(1, self.trip + 1) for _ in range(self.micro_batch_size))


def count(n: int, noun: str) -> str:
    """'1 brick', '3 bricks': a number with its noun, singular when the number is one."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def bricks_states(micro_batch_size: int, accumulation_steps: int) -> list[BricksState]:
    """Every state of one wall, from trip 0 (nothing carried) to trip K (wall built); K + 1 states."""
    check_int("micro_batch_size", micro_batch_size, 1, MAX_BRICKS_PER_TRIP)
    check_int("accumulation_steps", accumulation_steps, 1, MAX_TRIPS)
    return [BricksState(micro_batch_size, accumulation_steps, t) for t in range(accumulation_steps + 1)]


def describe(state: BricksState) -> str:
    """One or two plain sentences for `state`, in everyday words with the vocabulary in brackets."""
    b, K, t = state.micro_batch_size, state.accumulation_steps, state.trip
    everything, pile = count(state.effective_batch_size, "brick"), count(state.pile, "brick")
    if t == 0:
        return (
            f"Trip 0 of {K}: all {everything} are downstairs, the pile at the top is empty "
            f"(.grad is clear). Each trip will carry {count(b, 'brick')} (micro_batch_size b = {b})."
        )
    if not state.wall_built:
        return (
            f"Trip {t} of {K} (micro_steps done: {t}): the pile at the top holds {t} x {b} = {pile} "
            f"(the accumulated gradient). No wall yet: the update waits for trip {K}."
        )
    return (
        f"Trip {t} of {K} (micro_steps done: {t}): all {K} x {b} = {everything} are up "
        f"(effective_batch_size K·b), so ONE wall is built from the whole pile: the update "
        f"(optimizer.step()). Then the landing is cleared for the next wall (zero_grad)."
    )
