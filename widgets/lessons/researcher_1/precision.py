"""How far an accumulated gradient lands from the exact (float64) big-batch gradient in each precision: the H200
reference measurement's problem, scaled down for a CPU."""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Sequence

import torch

from widgets.core.config import FLOAT32, check_int, check_memory

MODES = {
    "float64": "parameters, data and .grad in float64 (the exact reference, summed in another order)",
    "float32": "parameters and .grad in float32",
    "bf16_autocast": "matmul in bfloat16 under torch.autocast, parameters and .grad in float32",
    "bf16_params": "parameters, data and .grad in bfloat16: every accumulation rounds to bfloat16",
    "bf16_params_fp32_master": "bfloat16 parameters, each micro-batch's .grad added into a float32 master copy",
}


@dataclass(frozen=True)
class PrecisionProblem:
    """A linear map and a batch in float64: x (n, d_in), y (n, d_out), weight (d_out, d_in), bias (d_out,)."""

    x: torch.Tensor
    y: torch.Tensor
    weight: torch.Tensor
    bias: torch.Tensor

    @property
    def num_examples(self) -> int:
        return self.x.shape[0]


def make_precision_problem(num_examples: int = 256, in_features: int = 64, out_features: int = 128,
                           seed: int = 0) -> PrecisionProblem:
    """The H200 block's setup (linear map, MSE), scaled down; float64 throughout."""
    check_int("num_examples", num_examples, 1, 100_000)
    check_int("in_features", in_features, 1, 8192)
    check_int("out_features", out_features, 1, 8192)
    check_int("seed", seed, 0, 2**31 - 1)
    check_memory(f"make_precision_problem(num_examples={num_examples}, in_features={in_features}, "
                 f"out_features={out_features}), float64",  # x, y, weight and bias
                 (num_examples * (in_features + out_features) + (in_features + 1) * out_features) * 8)
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(num_examples, in_features, generator=g, dtype=torch.float64)
    y = torch.randn(num_examples, out_features, generator=g, dtype=torch.float64)
    weight = torch.randn(out_features, in_features, generator=g, dtype=torch.float64) / in_features**0.5
    bias = torch.randn(out_features, generator=g, dtype=torch.float64) * 0.1
    return PrecisionProblem(x, y, weight, bias)


def _check_problem(problem: object) -> PrecisionProblem:
    if not isinstance(problem, PrecisionProblem):
        raise TypeError(f"problem must be a PrecisionProblem (from make_precision_problem), got {type(problem).__name__}")
    return problem


def _linear(problem: PrecisionProblem, dtype: torch.dtype) -> torch.nn.Linear:
    layer = torch.nn.Linear(problem.x.shape[1], problem.y.shape[1], dtype=dtype)
    with torch.no_grad():  # the float64 weights rounded once, straight to `dtype`
        layer.weight.copy_(problem.weight)
        layer.bias.copy_(problem.bias)
    return layer


def reference_gradient(problem: PrecisionProblem) -> torch.Tensor:
    """The float64 big-batch gradient of the mean squared error; flat, weight then bias."""
    problem = _check_problem(problem)
    layer = _linear(problem, torch.float64)
    torch.nn.functional.mse_loss(layer(problem.x), problem.y).backward()
    return torch.cat([layer.weight.grad.reshape(-1), layer.bias.grad])


def accumulated_gradient_in(problem: PrecisionProblem, mode: str, accumulation_steps: int) -> torch.Tensor:
    """The gradient accumulated over K equal micro-batches in `mode` (see MODES), as float64; flat."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {sorted(MODES)}, got {mode!r}")
    n = problem.num_examples
    check_int("accumulation_steps", accumulation_steps, 1, n)
    if n % accumulation_steps:
        raise ValueError(f"accumulation_steps must divide num_examples = {n}, got {accumulation_steps}")
    b = n // accumulation_steps
    param_dtype = {"float64": torch.float64, "bf16_params": torch.bfloat16,
                   "bf16_params_fp32_master": torch.bfloat16}.get(mode, torch.float32)
    layer = _linear(problem, param_dtype)
    x, y = problem.x.to(param_dtype), problem.y.to(param_dtype)
    master = [torch.zeros_like(p, dtype=torch.float32) for p in layer.parameters()]
    for i in range(0, n, b):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=mode == "bf16_autocast"):
            out = layer(x[i:i + b])
        loss = torch.nn.functional.mse_loss(out.to(param_dtype), y[i:i + b]) / accumulation_steps
        loss.backward()  # adds into .grad, rounding to .grad's dtype at every micro-step
        if mode == "bf16_params_fp32_master":
            for m, p in zip(master, layer.parameters()):
                m += p.grad.float()  # the running sum lives in float32
                p.grad = None
    if mode == "bf16_params_fp32_master":
        return torch.cat([m.reshape(-1) for m in master]).double()
    return torch.cat([layer.weight.grad.reshape(-1), layer.bias.grad]).double()


def relative_error(grad: torch.Tensor, reference: torch.Tensor) -> float:
    """max |grad - reference| / max |reference|: the H200 block's measure."""
    if grad.shape != reference.shape:
        raise ValueError(f"grad must have the shape of reference {tuple(reference.shape)}, got {tuple(grad.shape)}")
    return float((grad.double() - reference).abs().max() / reference.abs().max())


def precision_curves(problem: PrecisionProblem, modes: Sequence[str] = tuple(MODES),
                     accumulation_steps: Sequence[int] = (1, 2, 4, 8, 16, 32, 64)) -> dict[str, list[float]]:
    """{mode: relative error at each K}: the accumulated gradient against the float64 big batch."""
    problem = _check_problem(problem)
    reference = reference_gradient(problem)
    ks = list(accumulation_steps)
    if not ks:
        raise ValueError("accumulation_steps must hold at least one K")
    return {mode: [relative_error(accumulated_gradient_in(problem, mode, k), reference) for k in ks] for mode in modes}


def summation_orders(problem: PrecisionProblem, accumulation_steps: int = 16) -> dict[str, float]:
    """The same K float32 micro-gradients added forwards, backwards and pairwise: each one's error, and how far two differ."""
    problem = _check_problem(problem)
    n = problem.num_examples
    check_int("accumulation_steps", accumulation_steps, 2, n)
    if n % accumulation_steps:
        raise ValueError(f"accumulation_steps must divide num_examples = {n}, got {accumulation_steps}")
    b = n // accumulation_steps
    params = problem.weight.numel() + problem.bias.numel()
    # K float32 gradients kept to be added in three orders; the pairwise levels add at most K more
    check_memory(f"summation_orders with accumulation_steps={accumulation_steps} on {params} parameters",
                 (2 * accumulation_steps + 3) * params * FLOAT32)
    reference = reference_gradient(problem)
    parts = []
    for i in range(0, n, b):
        layer = _linear(problem, torch.float32)
        (torch.nn.functional.mse_loss(layer(problem.x[i:i + b].float()), problem.y[i:i + b].float())
         / accumulation_steps).backward()
        parts.append(torch.cat([layer.weight.grad.reshape(-1), layer.bias.grad]))
    forwards, backwards = functools.reduce(torch.add, parts), functools.reduce(torch.add, reversed(parts))
    pairwise = list(parts)
    while len(pairwise) > 1:
        pairwise = [pairwise[i] + pairwise[i + 1] if i + 1 < len(pairwise) else pairwise[i]
                    for i in range(0, len(pairwise), 2)]
    sums = {"forwards": forwards, "backwards": backwards, "pairwise": pairwise[0]}
    out = {name: relative_error(s, reference) for name, s in sums.items()}
    out["max |forwards - backwards|"] = float((forwards - backwards).abs().max())
    return out
