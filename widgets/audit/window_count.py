"""What each normaliser mistake divides one micro-batch's summed loss by, when the right divisor is
the window's count of items (real tokens, completion tokens): shared by the auditor's token and RL
problems, which differ only in what they count and in what they call the per-micro-batch mistake."""
from __future__ import annotations


def window_readings(n: int, K: int, items: int, window: int, positions: int, all_positions: int,
                    per_micro_batch: str, also: dict[str, list[float]] | None = None) -> dict[str | None, list[float]]:
    """Each mistake's factor c on a micro-batch of `items` counted items (`positions` with the padding)
    in a window of n micro-batches holding `window` items (`all_positions`); None is the right one,
    1 / window. `per_micro_batch` names the mistake of dividing by the micro-batch's own count;
    `also` holds a problem's own mistakes, read right after it."""
    return {
        None: [1 / window],
        per_micro_batch: [1 / (n * items), 1 / (K * items)],  # its own count, then / n (or / K)
        **(also or {}),
        "loss_not_divided": [1 / items],
        "padding_counted": [1 / (n * positions), 1 / (K * positions), 1 / positions, 1 / all_positions],
        "loss_divided_twice": [1 / (n * window), 1 / (K * window), items / window**2],
        "loss_sum_reduction": [1.0, 1 / n, 1 / K],
    }


def describe_window_factors(u: int, factors: list, window_items: dict[int, int], items: str, loss: str) -> str:
    """What the first micro-batch of update u was divided by, against the window's count of `items`."""
    j, c = factors[0].batch, factors[0].factor
    window = sum(window_items.values())
    return f"micro-batch {j} of update {u} ({window_items[j]} {items}; the window holds {window}) " \
           f"had its {loss} divided by {1 / c:.4g}, so each of its tokens weighs {c * window:.3g} x its share 1/{window}"
