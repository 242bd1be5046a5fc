"""The bricks analogy as data: b bricks per trip (micro_batch_size), K trips (accumulation_steps), then one wall.
The pile at the top is the accumulated gradient, a SUM of K armfuls; the wall (the update) pushes with the pile ÷ K."""
from __future__ import annotations

from dataclasses import dataclass, replace

from widgets.core.config import check_int
from widgets.core.views import Table

# The picture is laid out to hold up to 8 x 8 bricks.
MAX_BRICKS_PER_TRIP = 8
MAX_TRIPS = 8


@dataclass(frozen=True)
class BricksState:
    """The staircase after `trip` of `accumulation_steps` trips (0 = nothing carried yet)."""

    micro_batch_size: int  # b: bricks carried per trip
    accumulation_steps: int  # K: trips before the wall is built
    trip: int  # trips done so far, 0..K
    divided: bool = True  # False: the wall is built from the pile as it is (the forgot-to-divide bug)

    def __post_init__(self) -> None:
        check_int("micro_batch_size", self.micro_batch_size, 1, MAX_BRICKS_PER_TRIP)
        check_int("accumulation_steps", self.accumulation_steps, 1, MAX_TRIPS)
        check_int("trip", self.trip, 0, self.accumulation_steps)
        if not isinstance(self.divided, bool):
            raise TypeError(f"divided must be True or False, got {self.divided!r}")

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
    def strength(self) -> int:
        """The update's push under plain SGD, in right pushes: 1 divided, K undivided, 0 before the wall."""
        if not self.wall_built:
            return 0
        return 1 if self.divided else self.accumulation_steps

    @property
    def pile_trips(self) -> tuple[int, ...]:
        """For each brick in the pile, the trip (1..t) that carried it, in carrying order."""
        return tuple(t for t in range(1, self.trip + 1) for _ in range(self.micro_batch_size))


def count(n: int, noun: str) -> str:
    """'1 brick', '3 bricks': a number with its noun, singular when the number is one."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def midway(state: BricksState) -> BricksState:
    """`state` if its pile is growing, else the same wall half-way (trip ceil(K/2)): the frame that tells the story."""
    if 0 < state.trip < state.accumulation_steps:
        return state
    return replace(state, trip=(state.accumulation_steps + 1) // 2)


def update_rule(state: BricksState) -> str:
    """What the update is made of, in a few words: the pile divided by K, or the pile as it is."""
    K = state.accumulation_steps
    if K == 1:
        return "update = the one armful\n(nothing to divide)"
    if state.divided:
        return f"update = pile ÷ {K}\n(the average armful)"
    return f"update = pile as it is:\n{K}x too strong (bug)"


def describe(state: BricksState) -> str:
    """One or two plain sentences for `state`, in everyday words with the vocabulary in brackets."""
    b, K, t = state.micro_batch_size, state.accumulation_steps, state.trip
    everything, pile = count(state.effective_batch_size, "brick"), count(state.pile, "brick")
    if t == 0:
        return (f"Trip 0 of {K}: all {everything} are downstairs and the pile at the top is empty (.grad is "
                f"clear). Each trip carries {count(b, 'brick')} (micro_batch_size b = {b}).")
    if not state.wall_built:
        return (f"Trip {t} of {K}: the pile at the top holds {t} x {b} = {pile}, a sum (the accumulated "
                f"gradient). No wall yet: the update waits for trip {K}.")
    if K == 1:
        return (f"Trip 1 of 1: one armful of {everything} is the whole wall. Nothing is accumulated: this is "
                f"ordinary training with a batch of b = {b}, a smaller wall. Then the landing is cleared (zero_grad).")
    if state.divided:
        built = (f"The pile is a sum of {K} armfuls; the update pushes with their average, the pile ÷ {K}: "
                 f"what a single batch of {K * b} would give.")
    else:
        built = (f"BUG: the update pushes with the pile as it is, {K} armfuls never divided by {K}: "
                 f"{K} times too strong (forgot to divide).")
    return (f"Trip {K} of {K}: all {K} x {b} = {everything} are up (effective_batch_size K·b), and ONE wall is "
            f"built from all {everything}: the update (optimizer.step()). {built} Then the landing is cleared "
            "(zero_grad).")


def trips_table(micro_batch_size: int, accumulation_steps: int) -> Table:
    """Trip by trip, from nothing carried (trip 0) to the wall (trip K): the bricks in the pile and in the wall."""
    first = BricksState(micro_batch_size, accumulation_steps, 0)
    rows = [[f"{s.trip} of {s.accumulation_steps}", s.pile, s.downstairs, s.wall or "not yet"]
            for s in (replace(first, trip=t) for t in range(accumulation_steps + 1))]
    return Table(["trip", "bricks in the pile", "bricks downstairs", "bricks in the wall"], rows,
                 right=frozenset({"bricks in the pile", "bricks downstairs", "bricks in the wall"}))
