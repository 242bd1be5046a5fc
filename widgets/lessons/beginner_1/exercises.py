"""The beginner tier's checked questions and predictions (`beginner_exercises`), every answer computed by counting or by PyTorch."""
from __future__ import annotations

import torch

from widgets.lessons.beginner_1.bricks import BricksState
from widgets.exercises.toolkit import Exercise, ExerciseSet, Feedback, as_number, choice_checker, close_to, correct
from widgets.exercises.toolkit import diagnose, incorrect, number_checker


def grad_after_backwards(times: int, blame: float = 3.0) -> float:
    """What `knob.grad` holds after `(blame * knob).backward()` runs `times` times, never cleared."""
    knob = torch.tensor(2.0, requires_grad=True)
    for _ in range(times):
        (blame * knob).backward()  # backward adds into .grad: the pile grows
    return knob.grad.item()


def knob_pile(examples: int, trips: int, divide: bool = True, only_last_trip: bool = False) -> float:
    """`knob.grad` of the notebook's `y = knob * x` (x = 1..examples, y = 2x) after `trips` equal trips of MSE;
    `divide=False` leaves each trip's loss undivided, `only_last_trip` clears the pile inside the loop."""
    x = torch.arange(1.0, examples + 1.0)
    y = 2 * x
    knob = torch.tensor(0.5, requires_grad=True)
    size = examples // trips
    for first in range(0, examples, size):
        if only_last_trip:
            knob.grad = None
        loss = ((knob * x[first:first + size] - y[first:first + size]) ** 2).mean()
        (loss / trips if divide else loss).backward()
    return knob.grad.item()


def _check_three_trips(answer: object) -> Feedback:
    """The learner's `knob.grad` (or the knob itself, or a number) against the batch of 6."""
    if isinstance(answer, torch.Tensor) and answer.requires_grad and answer.grad is not None:
        answer = answer.grad  # they passed the knob: read its pile
    if isinstance(answer, torch.Tensor) and answer.requires_grad and answer.grad is None:
        return incorrect("that is the knob itself, and its .grad is empty: run your loop (each trip calls "
                         ".backward()), then pass knob.grad")
    value = as_number(answer, "knob.grad")
    big = knob_pile(6, 1)
    if close_to(value, big):
        return correct(f"{value:g} is the blame of the whole batch of 6: three trips of 2, each loss divided "
                       "by 3, pile up exactly what one big batch gives.")
    return diagnose(value, {
        knob_pile(6, 3, divide=False): "that is 3 times the big batch's blame: the pile as it is, never divided. "
                                       "Divide each trip's loss by trips = 3 before backward().",
        knob_pile(6, 3, only_last_trip=True): "that is the last trip's share alone: something cleared the pile "
                                              "(knob.grad = None) between trips. Clear it once, before the loop.",
        knob_pile(6, 3, divide=False, only_last_trip=True):
            "that is the last trip alone, undivided: the pile was cleared between trips and the loss not divided.",
        big / 2: "that is half the big batch's blame: you divided by 6 (the examples), but each trip's .mean() "
                 "already divides by its 2 examples. Divide by the number of trips, 3.",
        big / 3: "that is a third of the big batch's blame: the loss was divided by 3 twice.",
        2 * big: "that is twice the right pile: the loop ran twice onto the same knob (the cell run again?). "
                 "Make a fresh knob, or clear knob.grad, right before the loop.",
    }, f"{value:g} is not the blame of the batch of 6. Each trip: the .mean() loss over its 2 examples, "
       "divided by 3, then backward(); clear the pile only before the loop.")


def beginner_predictions() -> dict[str, dict]:
    """Beginner notebook 1's predictions (`make_prediction` keywords), off the page: the wrong guesses give answers away."""
    return {
        "wall": dict(
            question="A wall of 20 bricks, carried 5 at a time in 4 trips. After trip 2 of 4, how many bricks "
                     "are in the wall?",
            answer=lambda: BricksState(micro_batch_size=5, accumulation_steps=4, trip=2).wall,
            wrong_guesses={
                10: "10 bricks are up after 2 trips, but they wait in the pile: the wall is not started before the "
                    "last trip.",
                5: "no quarter-walls, not even one armful's worth: the wall waits for the last trip.",
            },
            explanation="The bricks carried so far wait in the pile (the accumulated gradient); the wall (the update) "
                        "is built once, after trip 4.",
        ),
        "second_backward": dict(
            question="knob.grad holds 3 after one loss.backward(). The same loss.backward() runs once more, with no "
                     "clearing in between. What will knob.grad hold?",
            answer=lambda: grad_after_backwards(2),
            wrong_guesses={3: "3 would mean PyTorch replaced the old blame; it adds the new blame to it."},
            explanation="backward() adds into .grad: 3 + 3. That adding is the pile, and it is all accumulation needs.",
        ),
        "undivided": dict(
            question="The two trips of 2 left -22.5 in knob.grad, each trip's loss divided by trips = 2. Run them "
                     "again without the division: what will knob.grad hold?",
            answer=lambda: knob_pile(examples=4, trips=2, divide=False),
            wrong_guesses={
                -22.5: "the division is what turns the pile (a sum of 2 trip-means) into their average; without "
                       "it the pile is not the same.",
                -11.25: "dividing makes the pile smaller, so leaving the division out makes it bigger, not smaller.",
            },
            explanation="Without the division the pile is the sum of the 2 trip-means, 2 times their average: "
                        "the pile used as it is, as if it were one trip's worth.",
        ),
    }


def beginner_exercises() -> ExerciseSet:
    """The checked questions of beginner notebook 1 (carrying bricks)."""
    return ExerciseSet("Carrying bricks", [
        Exercise(
            name="trips", title="How many trips?",
            prompt="A training recipe asks for 24 examples behind every update (effective_batch_size), and your "
            "computer can hold only 6 at a time (micro_batch_size). How many trips, accumulation_steps K, "
            "before each update? `ex.trips.check(K)`",
            checker=number_checker(4.0, {
                144.0: "144 = 24 x 6: the wall is K x b, so K is the wall divided by b, not multiplied.",
                18.0: "18 = 24 - 6: trips are a division, not a subtraction.",
                30.0: "30 = 24 + 6: trips are a division, not an addition.",
                0.25: "0.25 = 6 / 24, the division upside down: how many armfuls of 6 make 24?",
            }, "{value:g} trips of 6 carry {value:g} x 6 bricks, not 24.",
                "4 trips of 6: 4 x 6 = 24 examples behind each update, never more than 6 in memory.", "K"),
            hints=["The wall has K x b bricks. You know the wall (24) and b (6).",
             "K = 24 / 6."],
            solution="K = 24 // 6  # 4 trips of 6 bricks make the wall of 24",
            kind="compute",
        ),
        Exercise(
            name="divide_by", title="What to divide by",
            prompt="A batch of 12 examples is carried in trips of 3. Each trip's loss is `.mean()` over its own 3 "
            "examples. By what number must each trip's loss be divided so that the pile equals the blame of "
            "the whole batch of 12? `ex.divide_by.check(number)`",
            checker=number_checker(4.0, {
                1.0: "dividing by 1 is not dividing: the pile of 4 trips would be 4 times too big, the classic bug.",
                3.0: "3 is the trip's size, and the .mean() already divided by it. Count the trips.",
                12.0: "12 counts the examples, but each .mean() already divided by 3; dividing by 12 as well would "
                      "make the pile 3 times too small. Count the trips.",
            }, "{value:g} is not it: the pile holds one mean per trip; how many means are added up?",
                "4 trips, 4 means added up: divide each by 4 and the pile is their average, the mean over all "
                "12 (as .mean() over 3 and then / 4 is / 12 in all).", "number"),
            hints=["The pile adds one trip-mean per trip. How many trips are there?",
             "12 examples in trips of 3 is 4 trips; the pile is 4 means added up."],
            solution="number = 12 // 3  # the number of trips, K = 4 (each .mean() already divided by 3)",
            kind="compute",
        ),
        Exercise(
            name="one_trip", title="One trip: what does the wall become?",
            prompt="In the staircase above, set trips to 1 and leave 5 bricks per trip. Predict what the picture "
            "shows, then check: `ex.one_trip.check('A')` (or 'B', 'C').\n\n"
            "- **A**: the same wall as before, carried in one trip\n"
            "- **B**: a smaller wall of 5 bricks: ordinary training with a small batch\n"
            "- **C**: no wall at all: without accumulation nothing is built",
            checker=choice_checker("B", {
                "A": "the wall of 20 in one trip would mean carrying 20 bricks at once, and the memory for them; "
                     "with 5 per trip and one trip the wall holds only 5.",
                "C": "one trip still builds a wall: the update happens after the last trip, and with one trip that "
                     "is the first. It is ordinary training, with a batch of 5.",
            }, "one trip of 5 builds a wall of 5: ordinary training with a smaller, noisier batch, not the wall "
               "of 20 carried at once. Move the slider and the picture agrees."),
            hints=["The wall holds (trips) x (bricks per trip) bricks.",
             "With one trip of 5 the wall holds 5 bricks. Is that the old wall?"],
            solution="answer = 'B'  # 1 trip x 5 bricks: a wall of 5, a smaller batch, not the wall of 20",
            kind="predict",
        ),
        Exercise(
            name="four_trips", title="Forget to divide, in four trips",
            prompt="The knob model of section 3, its four examples now carried in 4 trips of 1, each trip's loss "
            "**not** divided. Predict the pile, compared with the blame of the big batch, then check: "
            "`ex.four_trips.check('A')` (or 'B', 'C', 'D').\n\n"
            "- **A**: the same as the big batch's\n- **B**: twice as big\n- **C**: four times as big\n"
            "- **D**: a quarter of it",
            checker=choice_checker("C", {
                "A": "the big batch averages its 4 examples; the undivided pile adds 4 trip-blames without "
                     "averaging them.",
                "B": "twice was the two trips of section 3. Each trip adds one undivided blame: count the trips.",
                "D": "dividing makes the pile smaller; leaving the division out makes it bigger.",
            }, "4 trips, 4 undivided blames added up: 4 times the big batch's blame. The pile grows with the "
               "number of trips, which is why the loss is divided by it."),
            hints=["Section 3: two trips without the division gave twice the big batch's blame.",
             "Each trip adds its whole blame. With 4 trips, how many blames are added up?"],
            solution="answer = 'C'  # 4 undivided trip-blames: 4 x the big batch's blame",
            kind="predict",
        ),
        Exercise(
            name="three_trips", title="Carry six examples in three trips",
            prompt="The knob model with examples x = 1, ..., 6 (answers y = 2x), knob starting at 0.5: carry them "
            "in 3 trips of 2 so that `knob.grad` ends up holding the blame of the whole batch of 6. Then "
            "`ex.three_trips.check(knob.grad)`.",
            checker=_check_three_trips,
            hints=["Copy the two-trip loop of section 3: a loop over the first example of each trip (0, 2, 4).",
             "In each trip: the loss is the .mean() over the trip's 2 examples, divided by trips = 3, then "
             "backward(). Clear knob.grad once, before the loop, not inside it."],
            solution="""
            knob = torch.tensor(0.5, requires_grad=True)
            trips = 3
            for first in (0, 2, 4):  # trips of 2 examples
                loss = ((knob * x6[first:first + 2] - y6[first:first + 2]) ** 2).mean() / trips
                loss.backward()  # adds this trip's share to the pile
            """,
            explanation="Each trip's mean divided by 3: the pile adds up to the blame of the batch of 6.",
            kind="code",
        ),
    ])
