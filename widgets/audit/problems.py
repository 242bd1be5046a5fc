"""The auditor's tiny seeded problems (regression, tokens, rl), and what each micro-batch's loss must weigh.

The last micro-batch is short, as drop_last=False leaves it."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property, partial
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch.nn.utils import skip_init

from widgets.core.accumulation import IGNORE_INDEX, real_tokens, windows
from widgets.core.mistakes import EVERY_MISTAKE
from widgets.core.time_limit import TIME_LIMIT_S

_equal = torch.equal  # bound at import: read while the loop runs, which may replace torch.equal
VOCAB = 5  # the token problem's vocabulary size
MAX_LENGTH = 8  # its padded sequence length


def _fraction(a: float) -> str:
    """0.0625 as '1/16', 1.0000001 and 0.9999999 both as '1' (every CPU prints the same), 1.25 as '1.25'."""
    if a > 0 and math.isclose(a, round(a), rel_tol=1e-6):
        return f"{round(a)}"
    if 0 < a < 1 and math.isclose(1 / a, round(1 / a), rel_tol=1e-6):
        return f"1/{round(1 / a)}"
    return f"{a:.4g}"


def short_size(b: int) -> int:
    """The last micro-batch's size, never K (b = K + 1), so a summed loss never reads as an undivided one."""
    return max(1, b // 2)


def batch_key(inputs: torch.Tensor) -> tuple:
    """A hashable fingerprint of a micro-batch's inputs, to tell which micro-batch a forward pass saw."""
    return tuple(inputs.shape), str(inputs.dtype), tuple(inputs.detach().reshape(-1).tolist())


def token_cross_entropy(logits: torch.Tensor, targets: torch.Tensor, reduction: str = "mean") -> torch.Tensor:
    """Cross-entropy of logits (b, T, V) against targets (b, T) over the real tokens ("mean": this micro-batch's)."""
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1),
                           ignore_index=IGNORE_INDEX, reduction=reduction)


class CountedWindow:
    """A task whose right normaliser is the window's count of items, the padding left out (tokens, rl)."""

    own_count: str  # the mistake of dividing by the micro-batch's own count
    summed: str  # its summed loss, in words
    group = 0  # rl: the completions per prompt the advantages are normalised over

    @classmethod
    def readings(cls, targets, window: list, K: int) -> dict[str | None, list[float]]:
        """Each mistake's factor c on one micro-batch's summed loss in a window of n (None: 1 / the window's items)."""
        n, items, total = len(window), cls.items(targets), sum(cls.items(t) for t in window)
        positions, all_positions = targets.numel(), sum(t.numel() for t in window)  # padding included
        return {
            None: [1 / total],
            cls.own_count: [1 / (n * items), 1 / (K * items)],  # its own count, then / n (or / K)
            **({"divided_by_group_twice": [1 / (total * cls.group)]} if cls.group else {}),
            "loss_not_divided": [1 / items],
            "padding_counted": [1 / (n * positions), 1 / (K * positions), 1 / positions, 1 / all_positions],
            "loss_divided_twice": [1 / (n * total), 1 / (K * total), items / total**2],
            "loss_sum_reduction": [1.0, 1 / n, 1 / K],
        }

    @classmethod
    def describe_factors(cls, u: int, factors: list, window_items: dict[int, int]) -> str:
        """What the first micro-batch of update u was divided by, against the window's count."""
        j, c = factors[0].batch, factors[0].factor
        w = sum(window_items.values())
        return f"micro-batch {j} of update {u} ({window_items[j]} {cls.counted}; the window holds {w}) had its " \
               f"{cls.summed} divided by {1 / c:.4g}, so each of its tokens weighs {c * w:.3g} x its share 1/{w}"


class Regression:
    """Linear regression on 3 features; b = K + 1, so a summed loss (b x) never reads as an undivided one (K x)."""

    name, unit, per_item = "regression", "examples", "squared errors"
    new_model = partial(skip_init, torch.nn.Linear, 3, 1, bias=False, dtype=torch.float64)  # no random init
    loss_fn = staticmethod(torch.nn.MSELoss())  # mean-reduced, as the gallery's loops expect
    items = len  # examples: what the mean squared error averages over

    @staticmethod
    def readings(targets: torch.Tensor, window: list[torch.Tensor], K: int) -> dict[str | None, list[float]]:
        """Each mistake's factor c on one micro-batch's summed loss in a window (None: the right one)."""
        n, items, total = len(window), len(targets), sum(len(t) for t in window)
        share = items / total
        on_mean = {  # the factor a on the mean loss is c n_i; the right one n_i/n
            None: [share],
            "tail_divided_by_k": [1 / K] if n < K else [],
            "normalised_per_micro_batch": [1 / n],  # every micro-batch weighs the same, short or not
            "loss_not_divided": [1.0],
            "loss_divided_twice": [1 / K**2, 1 / n**2, 1 / (n * K), share**2],
            "loss_sum_reduction": [items / n, items / K, float(items), items * share],
        }
        return {name: [a / items for a in values] for name, values in on_mean.items()}

    @staticmethod
    def describe_factors(u: int, factors: list, window_items: dict[int, int]) -> str:
        """The factor on each mean loss of update u (`factors`: LossFactor records), against n_i/n."""
        means = [f.factor * window_items[f.batch] for f in factors]  # c on the summed loss is a / n_i on the mean
        window = sum(window_items.values())
        shares = [window_items[f.batch] / window for f in factors]
        a, n = means[0], len(window_items)
        if all(math.isclose(m, a, rel_tol=1e-6) for m in means) and all(math.isclose(s, 1 / n) for s in shares):
            return f"each loss of update {u} was multiplied by {_fraction(a)}, not 1/{n}; its gradient came out " \
                   f"{a * n:.3g} x the reference"
        return f"update {u} weighted its micro-batch mean losses by {[float(f'{m:.3g}') for m in means]}, their " \
               f"shares n_i/n of its {window} examples are {[float(f'{s:.3g}') for s in shares]}"


class Tokens(CountedWindow):
    """A bigram language model on padded sequences of 1 to MAX_LENGTH real tokens, 3 per micro-batch."""

    name, unit, per_item, counted = "tokens", "sequences", "token losses", "real tokens"
    own_count, summed = "normalised_per_micro_batch", "summed token loss"
    new_model = partial(skip_init, torch.nn.Embedding, VOCAB, VOCAB, dtype=torch.float64)
    loss_fn = staticmethod(token_cross_entropy)
    items = staticmethod(real_tokens)  # what the token mean averages over: the targets != IGNORE_INDEX


FEATURES = 4  # features per position, what the policy reads
ACTIONS = 5  # the policy's vocabulary
COMPLETION_LENGTH = 8  # the padded completion length T
GROUP_SIZE = 6  # G completions per prompt, over which the rewards are normalised
COMPLETIONS_PER_MICRO_BATCH = 3  # b, the last micro-batch short_size(b)


@dataclass(frozen=True)
class Completions:
    """The targets of one micro-batch of completions."""

    tokens: torch.Tensor  # (b, T) the sampled tokens, IGNORE_INDEX at the padding
    advantages: torch.Tensor  # (b,)

    @property
    def mask(self) -> torch.Tensor:
        return self.tokens != IGNORE_INDEX

    def clone(self) -> "Completions":
        return Completions(self.tokens.clone(), self.advantages.clone())

    def __len__(self) -> int:
        return len(self.tokens)

    def numel(self) -> int:
        return self.tokens.numel()


def completion_tokens(targets: Completions) -> int:
    """The completion tokens of a micro-batch (the padding left out): what DAPO's normaliser counts."""
    return int(targets.mask.sum())


def policy_gradient_loss(logits: torch.Tensor, targets: Completions, reduction: str = "mean") -> torch.Tensor:
    """-A * log p(token), summed over the completion tokens of logits (b, T, V). reduction="mean"
    divides by this micro-batch's completion tokens; "sum" leaves the dividing to you."""
    if reduction not in ("mean", "sum"):
        raise ValueError(f"reduction must be 'mean' or 'sum', got {reduction!r}")
    logp = logits.log_softmax(-1).gather(-1, targets.tokens.clamp(min=0).unsqueeze(-1)).squeeze(-1)
    total = (-targets.advantages.unsqueeze(1) * logp * targets.mask).sum()  # over the completion tokens
    return total / completion_tokens(targets) if reduction == "mean" else total


def sequence_mean(summed_gradient: torch.Tensor, targets: Completions) -> torch.Tensor:
    """GRPO's per-sequence mean: each completion's gradient of the summed loss divided by its own length."""
    return summed_gradient / targets.mask.sum(1).clamp(min=1).to(summed_gradient.dtype).reshape(-1, 1, 1)


class Policy(CountedWindow):
    """The RL task, read like the token task. The right normaliser is DAPO's (Yu et al. (2025),
    arXiv:2503.14476): the window's completion tokens, so a token weighs the same wherever it sits;
    TRL's per-micro-batch "bnpo" does not."""

    name, unit, per_item, counted = "rl", "completions", "-A log p token losses", "completion tokens"
    own_count, summed, group = "per_micro_batch_normaliser", "summed -A log p", GROUP_SIZE  # bnpo's own count
    new_model = partial(skip_init, torch.nn.Linear, FEATURES, ACTIONS, bias=False, dtype=torch.float64)
    loss_fn = staticmethod(policy_gradient_loss)
    items = staticmethod(completion_tokens)
    shapes = {"grpo_sequence_mean": sequence_mean}  # the summed loss's gradient -> this shape's

    @staticmethod
    def describe_shape(u: int, j: int, targets: Completions) -> str:
        lengths = [int(n) for n in targets.mask.sum(1)]
        short, long = min(lengths), max(lengths)
        return f"micro-batch {j} of update {u} averaged each completion over its own tokens ({lengths}): a token " \
               f"of its {short}-token completion weighs {long / short:.3g} x one of its {long}-token completion"


TASKS = {"regression": Regression, "tokens": Tokens, "rl": Policy}


class AuditSetup(NamedTuple):
    """The options of one audit, checked where they enter (`audit_training_loop`)."""

    K: int
    N: int  # micro-batches handed to the loop (per rank)
    clip_norm: float | None = None
    with_scheduler: bool = False
    problem: str = "regression"  # a key of TASKS
    time_limit_s: float = TIME_LIMIT_S
    world_size: int = 1
    ddp: bool = False  # world_size > 1 and the loop takes no comm: it is written for DDP (no_sync)


@dataclass(frozen=True)
class Problem:
    """The audited run's data: micro-batches of (inputs, targets) and the window of each update."""

    task: type
    batches: list[tuple[torch.Tensor, torch.Tensor]]
    windows: list[range]  # the micro-batch indices of each update (core.accumulation.windows)
    K: int
    b: int  # examples (sequences) per micro-batch
    clip_norm: float | None
    with_scheduler: bool
    index_of: dict = field(default_factory=dict, repr=False)  # batch_key(inputs) -> micro-batch index
    world_size: int = 1
    rank: int = 0
    global_items: tuple[int, ...] = ()  # per update: the items of its window on every rank (world_size > 1)
    global_micro_items: tuple[int, ...] = ()  # per micro-batch j: the items of micro-batch j on every rank
    synced: "Problem | None" = field(default=None, repr=False)  # DDP form: all ranks' problem, whose mean is the truth

    def items(self, j: int) -> int:
        return self.task.items(self.batches[j][1])

    @cached_property
    def model(self) -> torch.nn.Module:
        return self.task.new_model()

    def forward(self, weight: torch.Tensor, inputs: torch.Tensor) -> torch.Tensor:
        """The task's model run at `weight`."""
        return torch.func.functional_call(self.model, {"weight": weight}, (inputs,))

    def item_sum_gradient(self, output: torch.Tensor, targets) -> torch.Tensor:
        """d/d output of the summed per-item losses (the mean loss times the items it averages), by autograd."""
        leaf = output.detach().requires_grad_(True)
        (grad,) = torch.autograd.grad(self.task.loss_fn(leaf, targets) * self.task.items(targets), leaf)
        return grad

    def item_sum_gradients(self, weight: torch.Tensor, window: range) -> list[torch.Tensor]:
        """Per micro-batch of `window`: the flat gradient of its summed per-item losses at `weight`."""
        w = weight.detach().clone().requires_grad_(True)
        return [torch.autograd.grad(self.task.loss_fn(self.forward(w, self.batches[j][0]), self.batches[j][1])
                                    * self.items(j), w)[0].reshape(-1) for j in window]

    def right_factor(self, u: int) -> float:
        """The factor c the right loop puts on update u's summed per-item loss: 1 / the window's items
        (across ranks world_size / all ranks' items, which DDP's mean over ranks brings to 1 / them)."""
        if self.world_size > 1:
            return self.world_size / self.global_items[u]
        return 1 / sum(self.items(j) for j in self.windows[u])

    def readings(self, j: int) -> dict[str | None, list[float]]:
        """Each mistake's factor c on micro-batch j's summed loss (None: the right one), across ranks too."""
        u = j // self.K
        readings = self.task.readings(self.batches[j][1], [self.batches[i][1] for i in self.windows[u]], self.K)
        if self.world_size == 1 or self.task is Regression:  # equal ranks: a rank's own share is its global one
            return readings
        own, n, W, every = readings.pop(None), len(self.windows[u]), self.world_size, self.global_micro_items[j]
        return {None: [self.right_factor(u)], "per_rank_normaliser": own + [W * c for c in own],  # x W for DDP's mean
                "ranks_divided_twice": [1 / self.global_items[u]],
                "count_all_reduced_per_micro_batch": [W / (n * every), W / (self.K * every)], **readings}

    @property
    def share_fix(self) -> str:
        """The fix for a loss weighted wrong, in this problem's terms (tokens, ranks, examples)."""
        if self.world_size > 1 and self.task is not Regression:
            return "all-reduce the window's real-token count once, before the first backward(), and multiply " \
                   "each rank's token sum by world_size / that count"
        if self.task is Regression:
            return EVERY_MISTAKE["wrong_loss_scale"].fix
        return f"divide each micro-batch's summed {self.task.per_item} by the {self.task.counted} of the whole " \
               "window, counted before the first backward()"

    def fix_for(self, name: str) -> str | None:
        """The fix of a loss-scale finding where this problem words it its own way, else None."""
        if self.world_size > 1 and self.task is not Regression and name not in ("per_rank_normaliser", "ranks_divided_twice",
                                                "count_all_reduced_per_micro_batch"):
            return self.share_fix
        if self.task is not Regression and name in ("wrong_loss_scale", "loss_not_divided"):
            return self.share_fix
        return None

    def describe(self, u: int, factors: list, window_items: dict[int, int]) -> str:
        """The factors on update u's losses in words, against the right ones."""
        if self.world_size == 1 or self.task is Regression:
            return self.task.describe_factors(u, factors, window_items)
        j, c, every = factors[0].batch, factors[0].factor, self.global_items[u]
        return f"on rank {self.rank}, micro-batch {j} of update {u} ({window_items[j]} real tokens; " \
               f"this rank's window holds {sum(window_items.values())}, all {self.world_size} ranks' {every}) had " \
               f"its summed loss divided by {1 / c:.4g}; after DDP's mean over ranks each token weighs " \
               f"{c * every / self.world_size:.3g} x its share 1/{every}"

    def window_of(self, inputs: torch.Tensor) -> tuple[int, ...]:
        """The two or more micro-batches j, j+1, ... whose inputs torch.cat makes `inputs`, else ()."""
        x = inputs.detach()
        if x.dim() == 0 or x.dtype != self.batches[0][0].dtype:
            return ()
        for start in range(len(self.batches)):
            window, row = [], 0
            for j in range(start, len(self.batches)):
                part = self.batches[j][0]
                if row + len(part) > len(x) or not _equal(x[row : row + len(part)], part):
                    break
                window.append(j)
                row += len(part)
                if row == len(x):
                    return tuple(window) if len(window) > 1 else ()
        return ()


def make_problem(setup: AuditSetup) -> Problem:
    """The seeded problem of `setup`, leaving the global random state alone."""
    g = torch.Generator().manual_seed(0)
    make = {"regression": _regression_batches, "tokens": _token_batches, "rl": _completion_batches}[setup.problem]
    batches, b = make(setup.K, setup.N, setup.clip_norm, g)
    index_of = {batch_key(x): j for j, (x, _) in enumerate(batches)}
    assert len(index_of) == setup.N, "two micro-batches with the same inputs could not be told apart"
    return Problem(TASKS[setup.problem], batches, windows(setup.N, setup.K), setup.K, b, setup.clip_norm,
                   setup.with_scheduler, index_of)


def _regression_batches(K, num_batches, clip_norm, g):
    b = K + 1
    sizes = [b] * (num_batches - 1) + [short_size(b)]  # the last micro-batch short, as drop_last=False leaves it
    x = torch.randn(sum(sizes), 3, generator=g, dtype=torch.float64)
    y = x @ torch.tensor([[1.5], [-2.0], [0.5]], dtype=torch.float64)
    y = y + 0.5 * torch.randn(y.shape, generator=g, dtype=torch.float64)
    if clip_norm is not None:
        # targets large enough that even a first micro-step's pile exceeds clip_norm, so clipping acts
        # (and shows) wherever the loop puts it; with zero starting weights the gradient scales with y
        smallest = min(float((2 / len(a)) * (a.T @ t).norm()) for a, t in zip(x.split(sizes), y.split(sizes)))
        y = y * max(1.0, 20 * K * clip_norm / smallest)
    return list(zip(x.split(sizes), y.split(sizes))), b


def _completion_batches(K, num_batches, clip_norm, g):
    """(features (b, T, FEATURES), Completions) micro-batches whose token counts differ inside every window."""
    b = COMPLETIONS_PER_MICRO_BATCH
    rows = [b] * (num_batches - 1) + [short_size(b)]
    total = sum(rows)
    behaviour = torch.randn(ACTIONS, FEATURES, generator=g, dtype=torch.float64)  # the policy that sampled them
    generated = math.ceil(total / GROUP_SIZE) * GROUP_SIZE  # whole groups; the loop sees the first `total`
    grouped = torch.randn(generated, generator=g, dtype=torch.float64).reshape(-1, GROUP_SIZE)  # the rewards
    advantages = ((grouped - grouped.mean(1, keepdim=True)) / (grouped.std(1, keepdim=True) + 1e-4)).reshape(-1)
    batches, start = [], 0
    for j, m in enumerate(rows):
        short = j % 2 == 0
        lengths = torch.randint(1, COMPLETION_LENGTH // 2 + 1, (m,), generator=g) + (0 if short else
                                                                                     COMPLETION_LENGTH // 2)
        real = torch.arange(COMPLETION_LENGTH) < lengths.unsqueeze(1)
        features = torch.randn(m, COMPLETION_LENGTH, FEATURES, generator=g, dtype=torch.float64) * real.unsqueeze(-1)
        probs = F.linear(features, behaviour).softmax(-1).reshape(-1, ACTIONS)
        sampled = torch.multinomial(probs, 1, generator=g).reshape(m, COMPLETION_LENGTH)
        tokens = torch.where(real, sampled, IGNORE_INDEX)
        batches.append((features, Completions(tokens, advantages[start : start + m].clone())))
        start += m
    return batches, b


def _token_batches(K, num_batches, clip_norm, g):
    """Sequences from a random bigram chain, whose real-token counts differ inside every window."""
    b = 3
    chain = torch.rand(VOCAB, VOCAB, generator=g, dtype=torch.float64) ** 3  # peaked: something to learn
    batches = []
    for j in range(num_batches):
        rows = b if j < num_batches - 1 else short_size(b)  # the last micro-batch short, as drop_last=False leaves it
        short = j % 2 == 0  # alternate short and long micro-batches: counts differ inside every window
        lengths = torch.randint(1, MAX_LENGTH // 2 + 1, (rows,), generator=g) + (0 if short else MAX_LENGTH // 2)
        tokens = torch.zeros(rows, MAX_LENGTH + 1, dtype=torch.long)
        tokens[:, 0] = torch.randint(0, VOCAB, (rows,), generator=g)
        for t in range(MAX_LENGTH):
            tokens[:, t + 1] = torch.multinomial(chain[tokens[:, t]], 1, generator=g).squeeze(1)
        real = torch.arange(MAX_LENGTH) < lengths.unsqueeze(1)
        inputs = torch.where(real, tokens[:, :-1], 0)  # padding input: token 0, its target ignored
        targets = torch.where(real, tokens[:, 1:], IGNORE_INDEX)
        batches.append((inputs, targets))
    return batches, b
