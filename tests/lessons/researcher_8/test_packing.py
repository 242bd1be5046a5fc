"""Packed rows against padded completions. Oracles: the padded completions' gradient (one completion per row),
and the weights each normaliser gives a token, written from the definitions over rows."""
import pytest
import torch

from widgets.lessons.researcher_8.packing import (
    AttentionPolicy, lay_out, pack, packed_gradient, row_token_losses, unpack,
)
from widgets.lessons.researcher_8.rl_losses import ATOL, LOSS_TYPES, RTOL, make_completions

SEEDS = (0, 1, 2)
CAPACITY = 32


def close(a, b):
    return torch.allclose(a, b, rtol=RTOL, atol=ATOL)


def setup(seed):
    c, policy = make_completions(seed=seed), AttentionPolicy(seed=seed)
    layout = pack(c.lengths, CAPACITY)
    return c, policy, layout, lay_out([[i] for i in range(len(c))], c.lengths, c.max_len), lay_out(layout, c.lengths, CAPACITY)


def test_pack_is_next_fit_in_order_and_lay_out_restarts_positions():
    assert pack([5, 3, 4, 6, 2], 8) == [[0, 1], [2], [3, 4]]
    rows = lay_out([[0, 1], [2]], [2, 3, 1], 6)
    assert rows.doc.tolist() == [[0, 0, 1, 1, 1, -1], [2, -1, -1, -1, -1, -1]]
    assert rows.position.tolist()[0] == [0, 1, 0, 1, 2, 0]
    assert rows.mask.sum().item() == 6 and len(rows) == 2


@pytest.mark.parametrize("call, match", [
    (lambda: pack([5, 9], 8), "capacity"),
    (lambda: lay_out([[0, 1]], [5, 4], 8), "capacity"),
    (lambda: packed_gradient(AttentionPolicy(), make_completions(), lay_out([[0]], [2], 16), "mean", True), "loss_type"),
])
def test_bad_input_names_the_parameter(call, match):
    with pytest.raises(ValueError, match=match):
        call()


@pytest.mark.parametrize("seed", SEEDS)
def test_with_per_document_attention_every_token_loss_is_its_padded_one(seed):
    c, policy, layout, padded, rows = setup(seed)
    alone = unpack(row_token_losses(policy, c, padded, True), padded, c)
    assert close(unpack(row_token_losses(policy, c, rows, True), rows, c), alone)
    assert close(unpack(row_token_losses(policy, c, padded, False), padded, c), alone)  # one completion: no mates
    # without it, exactly the first completion of each row keeps its loss: nothing comes before it
    shared = unpack(row_token_losses(policy, c, rows, False), rows, c).sum(dim=1)
    kept = torch.isclose(shared, alone.sum(dim=1), rtol=RTOL, atol=ATOL)
    assert kept.nonzero().flatten().tolist() == [row[0] for row in layout]


@pytest.mark.parametrize("seed", SEEDS)
def test_only_the_token_means_survive_packing_and_unpacking_fixes_the_rest(seed):
    c, policy, _, padded, rows = setup(seed)
    for loss_type in LOSS_TYPES:
        truth = packed_gradient(policy, c, padded, loss_type, True)
        assert close(packed_gradient(policy, c, rows, loss_type, True), truth) == (loss_type in ("bnpo", "dapo"))
        assert close(packed_gradient(policy, c, rows, loss_type, True, by_completion=True), truth)
        for by_completion in (False, True):  # attention across the row changes the token losses themselves
            assert not close(packed_gradient(policy, c, rows, loss_type, False, by_completion), truth)


@pytest.mark.parametrize("seed", SEEDS)
def test_packed_rows_weigh_tokens_as_the_definitions_over_rows_say(seed):
    c, policy, layout, padded, rows = setup(seed)
    R, row_tokens = len(layout), {i: sum(c.lengths[j] for j in row) for row in layout for i in row}
    weights = {"grpo": [1 / (R * row_tokens[i]) for i in range(len(c))],  # each row's token mean, over R rows
               "dr_grpo": [1 / (R * c.max_len)] * len(c)}  # rows x max_len where completions x max_len was meant
    for loss_type, w in weights.items():
        policy.zero_grad(set_to_none=True)
        losses = row_token_losses(policy, c, padded, True)  # padded alone: the oracle's token losses
        (torch.tensor(w, dtype=losses.dtype)[:, None] * losses * padded.mask).sum().backward()
        oracle = torch.cat([q.grad.reshape(-1) for q in policy.parameters()])
        assert close(packed_gradient(policy, c, rows, loss_type, True), oracle), loss_type
    G = len(c)
    assert close(packed_gradient(policy, c, rows, "dr_grpo", True), G / R * packed_gradient(policy, c, padded, "dr_grpo", True))
