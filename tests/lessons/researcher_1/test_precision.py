"""Precision: errors against the float64 big batch, per mode, over seeds and K."""
import pytest
import torch

from widgets.lessons.researcher_1.precision import (
    MODES,
    accumulated_gradient_in,
    make_precision_problem,
    precision_curves,
    reference_gradient,
    relative_error,
    summation_orders,
)

KS = (1, 2, 4, 8, 16, 32, 64)


@pytest.fixture(scope="module", params=(0, 1, 2))
def curves(request):
    return precision_curves(make_precision_problem(256, 32, 64, seed=request.param), accumulation_steps=KS)


def test_reference_is_plain_autograd():
    p = make_precision_problem(32, 4, 3, seed=0)
    w, b = p.weight.clone().requires_grad_(), p.bias.clone().requires_grad_()
    torch.nn.functional.mse_loss(p.x @ w.T + b, p.y).backward()
    assert torch.allclose(reference_gradient(p), torch.cat([w.grad.reshape(-1), b.grad]), rtol=1e-12, atol=1e-15)


def test_float64_and_float32_are_exact_to_their_rounding(curves):
    assert max(curves["float64"]) < 1e-13
    assert max(curves["float32"]) < 2e-6


def test_bf16_grad_grows_with_k_and_a_float32_master_keeps_it_flat(curves):
    bf16 = curves["bf16_params"]
    assert bf16[-1] > 2.5 * bf16[0]  # rounding piles up over 64 additions
    master = curves["bf16_params_fp32_master"]
    assert max(master) < 1.5 * master[0]
    assert max(curves["bf16_autocast"]) < 1.5 * curves["bf16_autocast"][0]
    assert bf16[-1] > 3 * master[-1]


def test_summation_orders_differ_only_in_rounding():
    out = summation_orders(make_precision_problem(256, 32, 64, seed=0), accumulation_steps=16)
    assert 0 < out["max |forwards - backwards|"] < 1e-6
    assert all(out[k] < 2e-6 for k in ("forwards", "backwards", "pairwise"))


@pytest.mark.parametrize("call, exc, match", [
    (lambda p: accumulated_gradient_in(p, "fp8", 2), ValueError, "mode"),
    (lambda p: accumulated_gradient_in(p, "float32", 512), ValueError, "accumulation_steps"),
    (lambda p: accumulated_gradient_in(p, "float32", 3), ValueError, "accumulation_steps must divide"),
    (lambda p: precision_curves("p"), TypeError, "problem"),
    (lambda p: precision_curves(p, accumulation_steps=()), ValueError, "accumulation_steps"),
    (lambda p: summation_orders(p, 1), ValueError, "accumulation_steps"),
    (lambda p: relative_error(torch.zeros(3), torch.zeros(4)), ValueError, "grad"),
    (lambda p: make_precision_problem(0), ValueError, "num_examples"),
])
def test_bad_input_names_the_parameter(call, exc, match):
    with pytest.raises(exc, match=match):
        call(make_precision_problem(16, 2, 2))


def test_modes_are_described():
    assert set(MODES) == {"float64", "float32", "bf16_autocast", "bf16_params", "bf16_params_fp32_master"}


def test_sizes_past_the_ceiling_are_refused_before_allocating(before_allocating, monkeypatch):
    from widgets.core.config import BudgetError
    with before_allocating(), pytest.raises(
            BudgetError, match=r"make_precision_problem\(num_examples=100000, in_features=8192, out_features=8192\), "
                               r"float64 would need about 12\.7 GB, over this lab's limit of 1\.0 GB"):
        make_precision_problem(100_000, 8192, 8192)
    problem = make_precision_problem(num_examples=256, in_features=64, out_features=128, seed=0)  # researcher_1's
    monkeypatch.setenv("LAB_MEMORY_LIMIT_MB", "8")  # K gradients kept at once: K = 256 needs 16 MB, the notebook's 16 1 MB
    with before_allocating(), pytest.raises(BudgetError, match=r"summation_orders with accumulation_steps=256 on 8320 "
                                            r"parameters would need about 16 MB, over this lab's limit of 8 MB"):
        summation_orders(problem, accumulation_steps=256)
    assert summation_orders(problem, accumulation_steps=16)["forwards"] < 1e-5


@pytest.mark.parametrize("seed", range(5))
def test_float32_is_flat_to_k_64_and_grows_many_times_by_k_4096(seed):
    """researcher_1's claim: float32 stays at its rounding (below 1e-6) up to K = 64 and is at least 4 times
    that by K = 4096, still below 1e-5. The factor measured is 6 to 10 on every path tried (native, MKL_CBWR
    AUTO and COMPATIBLE, ATEN default): a growth, not the order the rounding noise of one CPU happens to take.
    (The earlier claim, "at least 1.2 times larger at K = 256", failed on an AVX512 machine.)"""
    errors = precision_curves(make_precision_problem(4096, 64, 128, seed=seed), modes=("float32",),
                              accumulation_steps=(1, 4, 16, 64, 4096))["float32"]
    up_to_64, at_4096 = max(errors[:-1]), errors[-1]
    assert up_to_64 < 1e-6
    assert 4 * up_to_64 <= at_4096 < 1e-5
