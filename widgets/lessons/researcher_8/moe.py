"""MoE load balancing under accumulation: the balance loss E * sum_e f_e * P_e is a product of batch means.

So K micro-batch losses / K are not the window's (Qiu et al. 2025); the fix counts f over the window first. Float64."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from widgets.core.accumulation import flat_grad
from widgets.core.config import check_float, check_int

DTYPE = torch.float64
AUX_MODES = ("none", "micro_batch", "global", "micro_batch_not_divided")


@dataclass(frozen=True)
class DomainTokens:
    """Tokens of `num_domains` domains, x (N, d), y (N,), domain (N,); n consecutive rows are one domain."""

    x: torch.Tensor
    y: torch.Tensor
    domain: torch.Tensor
    num_domains: int

    def micro_batches(self, accumulation_steps: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """K consecutive micro-batches; with K = num_domains, each holds one domain's tokens."""
        parts = torch.arange(len(self.y)).tensor_split(accumulation_steps)
        return [(self.x[p], self.y[p]) for p in parts]


def make_domain_tokens(num_domains: int = 4, tokens_per_domain: int = 64, dim: int = 8, seed: int = 0) -> DomainTokens:
    """Each domain: inputs around its own centre, a target from its own linear rule (one expert can learn it)."""
    check_int("num_domains", num_domains, 1, 64)
    check_int("tokens_per_domain", tokens_per_domain, 1, 4096)
    check_int("dim", dim, 1, 256)
    check_int("seed", seed, 0, 2**31 - 1)
    g = torch.Generator().manual_seed(seed)
    centres = 2.0 * torch.randn(num_domains, dim, generator=g, dtype=DTYPE)
    rules = torch.randn(num_domains, dim, generator=g, dtype=DTYPE)
    domain = torch.arange(num_domains).repeat_interleave(tokens_per_domain)
    x = centres[domain] + torch.randn(len(domain), dim, generator=g, dtype=DTYPE)
    y = (x * rules[domain]).sum(dim=1) / dim  # targets of order one
    return DomainTokens(x, y, domain, num_domains)


class TinyMoE(torch.nn.Module):
    """A router and `num_experts` linear experts, top-k: out = sum over the chosen experts of p_e(x) expert_e(x)."""

    def __init__(self, dim: int = 8, num_experts: int = 4, top_k: int = 1, seed: int = 0):
        super().__init__()
        self.num_experts = check_int("num_experts", num_experts, 2, 64)
        self.top_k = check_int("top_k", top_k, 1, num_experts)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(check_int("seed", seed, 0, 2**31 - 1))
            self.router = torch.nn.Linear(check_int("dim", dim, 1, 256), num_experts, bias=False)
            self.experts = torch.nn.Linear(dim, num_experts)  # row e is expert e's weights
        self.to(DTYPE)

    def route(self, x: torch.Tensor) -> torch.Tensor:
        """(N, top_k) the chosen experts' ids."""
        return self.router(x).topk(self.top_k, dim=-1).indices

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(N,) outputs, (N, E) router probabilities, (N, top_k) chosen experts."""
        probs = torch.softmax(self.router(x), dim=-1)
        chosen = probs.topk(self.top_k, dim=-1).indices
        out = (probs.gather(1, chosen) * self.experts(x).gather(1, chosen)).sum(dim=1)
        return out, probs, chosen


def expert_counts(chosen: torch.Tensor, num_experts: int) -> torch.Tensor:
    """(E,) how many routing slots went to each expert (float64)."""
    return torch.bincount(chosen.reshape(-1), minlength=num_experts).to(DTYPE)


def aux_loss(probs: torch.Tensor, chosen: torch.Tensor) -> torch.Tensor:
    """E * sum_e f_e * P_e over one batch: f_e its fraction of routing slots (no gradient), P_e its mean probability."""
    E = probs.shape[1]
    f = expert_counts(chosen, E) / chosen.numel()
    return E * (f * probs.mean(dim=0)).sum()


def router_z_loss_sum(model: TinyMoE, x: torch.Tensor) -> torch.Tensor:
    """Zoph et al.'s (2022) router z-loss summed over tokens: sum_t logsumexp(router logits_t)^2."""
    return torch.logsumexp(model.router(x), dim=-1).pow(2).sum()


def full_batch_step(model: TinyMoE, x: torch.Tensor, y: torch.Tensor, aux_coef: float) -> float:
    """The oracle: one pass over the whole window, MSE mean + aux_coef * the window's aux loss; .grad filled."""
    out, probs, chosen = model(x)
    loss = ((out - y) ** 2).mean() + aux_coef * aux_loss(probs, chosen)
    loss.backward()
    return float(loss.detach())


def micro_batch_aux_step(model: TinyMoE, micro_batches: list, aux_coef: float, divide_aux: bool = True) -> float:
    """Each micro-batch's task mean and own aux loss, each / K (`divide_aux=False`: the aux loss is not)."""
    K, N = len(micro_batches), sum(len(y) for _, y in micro_batches)
    total = 0.0
    for x, y in micro_batches:
        out, probs, chosen = model(x)
        aux = aux_loss(probs, chosen)  # this micro-batch's own f and P
        loss = ((out - y) ** 2).sum() / N + aux_coef * (aux / K if divide_aux else aux)
        loss.backward()
        total += float(loss.detach())
    return total


def window_aux_step(model: TinyMoE, micro_batches: list, aux_coef: float) -> float:
    """Accumulate the window's task mean and its global aux loss E * sum_e f_e * P_e, one graph at
    a time."""
    E = model.num_experts
    N = sum(len(y) for _, y in micro_batches)  # the window's tokens
    with torch.no_grad():  # 1. route the whole window first: f is a count, it needs no graph
        counts = sum(expert_counts(model.route(x), E) for x, _ in micro_batches)
    f = counts / counts.sum()  # the fraction of the window's routing slots each expert got
    total = 0.0
    for x, y in micro_batches:  # 2. each micro-batch adds its tokens' part of the window's P
        out, probs, _ = model(x)
        # sums over the micro-batches to E * sum_e f_e * P_e
        aux = E * (f * probs.sum(dim=0)).sum() / N
        # the task mean over the window, likewise
        loss = ((out - y) ** 2).sum() / N + aux_coef * aux
        loss.backward()  # backward adds into .grad: this is the accumulation
        total += float(loss.detach())
    return total


def step_gradient(model: TinyMoE, data: DomainTokens, accumulation_steps: int, aux_mode: str,
                  aux_coef: float = 0.1) -> tuple[float, torch.Tensor]:
    """(loss, flat gradient) of one update under `aux_mode` ("full": one pass, the oracle); .grad left empty."""
    model.zero_grad(set_to_none=True)
    if aux_mode == "full":
        loss = full_batch_step(model, data.x, data.y, aux_coef)
    else:
        loss = _window_step(model, data.micro_batches(accumulation_steps), aux_mode, aux_coef)
    grad = flat_grad(model)
    model.zero_grad(set_to_none=True)
    return loss, grad


def _window_step(model: TinyMoE, micro_batches: list, aux_mode: str, aux_coef: float) -> float:
    if aux_mode == "global":
        return window_aux_step(model, micro_batches, aux_coef)
    if aux_mode in ("micro_batch", "micro_batch_not_divided"):
        return micro_batch_aux_step(model, micro_batches, aux_coef, divide_aux=aux_mode == "micro_batch")
    if aux_mode == "none":
        return window_aux_step(model, micro_batches, 0.0)
    raise ValueError(f"aux_mode must be one of {AUX_MODES} or 'full', got {aux_mode!r}")


def aux_values(model: TinyMoE, data: DomainTokens, accumulation_steps: int) -> tuple[float, float]:
    """(the mean of the K micro-batches' own aux losses, the window's aux loss), at the current weights."""
    with torch.no_grad():
        micro = [aux_loss(*model(x)[1:]) for x, _ in data.micro_batches(accumulation_steps)]
        whole = aux_loss(*model(data.x)[1:])
    return float(sum(micro) / len(micro)), float(whole)


@dataclass(frozen=True)
class RouterRun:
    """After training: per-domain and overall expert loads, their specialisation and the final task loss."""

    load: list[list[float]]
    expert_load: list[float]
    specialisation: float
    task_loss: float


def train_router(aux_mode: str, seed: int = 0, accumulation_steps: int = 4, updates: int = 100,
                 aux_coef: float = 0.3) -> RouterRun:
    """Train a top-1 TinyMoE of 4 experts with Adam on K domain-homogeneous micro-batches per update; the loads."""
    if aux_mode not in AUX_MODES:
        raise ValueError(f"aux_mode must be one of {AUX_MODES}, got {aux_mode!r}")
    check_int("updates", updates, 1, 10_000)
    check_float("aux_coef", aux_coef, 0.0, 100.0, low_inclusive=True)
    data = make_domain_tokens(seed=seed)
    check_int("accumulation_steps", accumulation_steps, 1, len(data.y))
    model = TinyMoE(data.x.shape[1], seed=seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.05)
    micro_batches = data.micro_batches(accumulation_steps)
    for _ in range(updates):
        _window_step(model, micro_batches, aux_mode, aux_coef)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    with torch.no_grad():
        out, _, chosen = model(data.x)
        task = float(((out - data.y) ** 2).mean())
    first = chosen[:, 0]  # each token's top expert
    load = [[float((first[data.domain == d] == e).double().mean()) for e in range(model.num_experts)]
            for d in range(data.num_domains)]
    expert_load = [float((first == e).double().mean()) for e in range(model.num_experts)]
    return RouterRun(load, expert_load, sum(max(row) for row in load) / len(load), task)
