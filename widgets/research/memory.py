"""The four memory terms of training, in bytes, counted from the tensors themselves, on a `TinyGPT` laid out like
the transformer Korthikanti et al. (2022) count, so that `widgets.research.planner`'s formula can be checked."""
from __future__ import annotations

import copy
import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

from widgets.core.config import FLOAT32, FLOPS_PER_SECOND, check_float, check_int, check_memory, check_time
from widgets.research.planner import activation_bytes_per_layer
from widgets.research.saved_bytes import PeakBytesCounter, SavedTensorCounter  # researcher_4's cell shows the latter
from widgets.research.saved_bytes import allocator_peak


@dataclass(frozen=True)
class MemoryTerms:
    """Bytes of each term for one micro-step of b examples (`micro_batch_size`)."""

    micro_batch_size: int
    parameters: int
    gradients: int
    optimizer_state: int
    activations: int
    saved_total: int          # everything autograd saved, the weights it saved included
    forward_passes: int = 1   # block forwards per micro-step (checkpointing recomputes: 2)
    peak: int = 0             # most bytes alive at once over forward + backward, beyond weights and .grad
    allocator_peak: int = 0   # the same peak read from the CPU allocator's own events (torch.profiler; 0: not read)

    @property
    def fixed(self) -> int:
        """The terms that do not grow with b."""
        return self.parameters + self.gradients + self.optimizer_state

    @property
    def total(self) -> int:
        return self.fixed + self.activations


def tensor_bytes(tensors) -> int:
    """Bytes held by `tensors` (an iterable of tensors; None entries are skipped)."""
    return sum(t.nbytes for t in tensors if t is not None)


def optimizer_state_bytes(optimizer: torch.optim.Optimizer) -> int:
    """Bytes of every tensor in the optimizer's state (Adam: exp_avg and exp_avg_sq; SGD: none)."""
    return tensor_bytes(v for state in optimizer.state.values() for v in state.values()
                        if isinstance(v, torch.Tensor) and v.dim() > 0)


class Block(torch.nn.Module):
    """One pre-LayerNorm decoder layer: causal attention, then a 4h GELU MLP; `sdpa`: fused attention."""

    def __init__(self, hidden: int, heads: int, dropout: float, sdpa: bool = False):
        super().__init__()
        self.heads, self.dropout, self.sdpa = heads, dropout, sdpa
        self.ln1, self.ln2 = torch.nn.LayerNorm(hidden), torch.nn.LayerNorm(hidden)
        self.qkv, self.proj = torch.nn.Linear(hidden, 3 * hidden), torch.nn.Linear(hidden, hidden)
        self.fc1, self.fc2 = torch.nn.Linear(hidden, 4 * hidden), torch.nn.Linear(4 * hidden, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, h = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, s, 3, self.heads, h // self.heads).permute(2, 0, 3, 1, 4)
        mixed = self._attend(q, k, v).transpose(1, 2).reshape(b, s, h)  # no name holds the heads' output
        x = x + F.dropout(self.proj(mixed), self.dropout, self.training)
        return x + F.dropout(self.fc2(F.gelu(self.fc1(self.ln2(x)))), self.dropout, self.training)

    def _attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """Causal attention of (b, a, s, d) heads: fused, or the scores written out."""
        if self.sdpa:
            return F.scaled_dot_product_attention(q, k, v, dropout_p=self.dropout if self.training else 0.0,
                                                  is_causal=True)
        s = q.shape[-2]
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
        causal = torch.ones(s, s, dtype=torch.bool, device=q.device).triu(1)
        return F.dropout(scores.masked_fill(causal, float("-inf")).softmax(-1), self.dropout, self.training) @ v


def tiny_gpt_parameters(layers: int, hidden: int, seq_len: int, vocab: int) -> int:
    """TinyGPT's parameter count: two embeddings, `layers` blocks of 12 h^2 + 13 h, the last LayerNorm (tied head)."""
    return (vocab + seq_len) * hidden + layers * (12 * hidden * hidden + 13 * hidden) + 2 * hidden


def micro_step_estimate(layers: int, hidden: int, heads: int, seq_len: int, vocab: int,
                        micro_batch_size: int, checkpointing: bool = False) -> tuple[int, float]:
    """A high estimate of (bytes, seconds) of `measure_memory_terms` on such a TinyGPT."""
    b, s, h = micro_batch_size, seq_len, hidden
    params = tiny_gpt_parameters(layers, h, s, vocab)
    saved = layers * activation_bytes_per_layer(s, b, h, heads, element_bytes=FLOAT32, mask_bytes=1) * 3 // 2
    logits = 3 * b * s * vocab * FLOAT32
    forward_flops = 2 * b * s * (params - vocab * h - s * h) + 2 * b * s * vocab * h + 4 * layers * b * s * s * h
    return 5 * params * FLOAT32 + saved + logits, 2 * (4 if checkpointing else 3) * forward_flops / FLOPS_PER_SECOND


class TinyGPT(torch.nn.Module):
    """A small decoder-only transformer (token + position embeddings, `layers` blocks, tied head); `sdpa`: fused attention."""

    def __init__(self, layers: int = 2, hidden: int = 64, heads: int = 4, seq_len: int = 32, vocab: int = 128,
                 dropout: float = 0.1, seed: int = 0, sdpa: bool = False):
        super().__init__()
        check_int("layers", layers, 1, 64)
        check_int("hidden", hidden, 1, 4096)
        check_int("heads", heads, 1, hidden)
        if hidden % heads:
            raise ValueError(f"heads must divide hidden = {hidden}, got heads = {heads}")
        self.seq_len = check_int("seq_len", seq_len, 1, 4096)
        self.vocab = check_int("vocab", vocab, 2, 100_000)
        check_float("dropout", dropout, 0.0, 0.99, low_inclusive=True)
        check_memory(f"TinyGPT(layers={layers}, hidden={hidden}, seq_len={seq_len}, vocab={vocab}), float32 weights",
                     tiny_gpt_parameters(layers, hidden, seq_len, vocab) * FLOAT32)  # before any tensor exists
        self.heads = heads
        self.checkpoint_blocks = False
        self.block_forwards = 0
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(check_int("seed", seed, 0))
            self.embed, self.position = torch.nn.Embedding(vocab, hidden), torch.nn.Embedding(seq_len, hidden)
            self.blocks = torch.nn.ModuleList(Block(hidden, heads, dropout, bool(sdpa)) for _ in range(layers))
            self.ln = torch.nn.LayerNorm(hidden)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.trunk(tokens) @ self.embed.weight.T  # the tied head: (b, s, h) -> (b, s, V) logits

    def trunk(self, tokens: torch.Tensor) -> torch.Tensor:
        """Everything but the output layer: (b, s) tokens -> (b, s, h), after the last LayerNorm."""
        x = self.embed(tokens) + self.position(torch.arange(tokens.shape[1], device=tokens.device))
        for block in self.blocks:
            if self.checkpoint_blocks and torch.is_grad_enabled():
                # keeps only the block's input (saved through autograd, so the counter sees it)
                x = checkpoint(self._counted, block, x, use_reentrant=False)
            else:
                x = self._counted(block, x)
        return self.ln(x)

    def _counted(self, block: Block, x: torch.Tensor) -> torch.Tensor:
        self.block_forwards += 1
        return block(x)


def language_model_batch(model: TinyGPT, batch_size: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Random tokens (batch_size, seq_len) and next-token targets for `model`."""
    g = torch.Generator().manual_seed(check_int("seed", seed, 0))
    tokens = torch.randint(0, model.vocab, (check_int("batch_size", batch_size, 1), model.seq_len + 1), generator=g)
    return tokens[:, :-1], tokens[:, 1:]


def lm_loss(model: TinyGPT, tokens: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean next-token cross-entropy over every token of the micro-batch."""
    logits = model(tokens)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def chunked_lm_backward(model: TinyGPT, tokens: torch.Tensor, targets: torch.Tensor, chunks: int) -> float:
    """`lm_loss(...).backward()` in `chunks` pieces of the sequence (a chunked cross-entropy); returns the loss."""
    if not isinstance(model, TinyGPT):
        raise TypeError(f"model must be a TinyGPT, got {type(model).__name__}")
    check_int("chunks", chunks, 1, tokens.shape[1])
    hidden = model.trunk(tokens)
    cut = hidden.detach().requires_grad_()  # the output layer's part of the graph starts here
    total = 0.0
    for piece in torch.arange(tokens.shape[1]).tensor_split(chunks):
        logits = cut[:, piece] @ model.embed.weight.T
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets[:, piece].reshape(-1),
                               reduction="sum") / targets.numel()  # each token: 1 / all tokens, as lm_loss
        loss.backward()  # frees this piece's logits and their gradients; cut.grad and .grad add up
        total += float(loss.detach())
    hidden.backward(cut.grad)
    return total


def measure_memory_terms(model: TinyGPT, micro_batch_size: int, checkpointing: bool = False,
                         allocator: bool = False) -> MemoryTerms:
    """One micro-step and one Adam step on a copy of `model`, every term in bytes (`allocator`: also `allocator_peak`)."""
    if not isinstance(model, TinyGPT):
        raise TypeError(f"model must be a TinyGPT, got {type(model).__name__}")
    b = check_int("micro_batch_size", micro_batch_size, 1, 4096)
    # the ceiling is checked on the sizes, before the copy, the batch or any activation exists
    shape = dict(layers=len(model.blocks), hidden=model.embed.embedding_dim, heads=model.heads, seq_len=model.seq_len,
                 vocab=model.vocab)
    needs, seconds = micro_step_estimate(**shape, micro_batch_size=b, checkpointing=bool(checkpointing))
    what = f"measure_memory_terms on TinyGPT({', '.join(f'{k}={v}' for k, v in shape.items())}) with micro_batch_size={b}"
    check_memory(what, needs)
    check_time(what, seconds)
    net = copy.deepcopy(model)
    net.checkpoint_blocks, net.block_forwards = bool(checkpointing), 0
    tokens, targets = language_model_batch(net, b)
    for p in net.parameters():  # a micro-step inside the window: the gradient buffer is already there
        p.grad = torch.zeros_like(p)
    with torch.random.fork_rng(devices=[]), PeakBytesCounter() as peak:
        torch.manual_seed(0)  # the same dropout draws in both counts
        with SavedTensorCounter(net) as saved:
            loss = lm_loss(net, tokens, targets)
        loss.backward()
    allocated = 0
    if allocator:
        with torch.random.fork_rng(devices=[]):  # the same micro-step again, read from the allocator's events
            torch.manual_seed(0)
            allocated = allocator_peak(lambda: lm_loss(net, tokens, targets).backward())
    opt = torch.optim.Adam(net.parameters())
    opt.step()
    forwards = net.block_forwards / len(net.blocks)
    return MemoryTerms(
        micro_batch_size=b,
        parameters=tensor_bytes(net.parameters()),
        gradients=tensor_bytes(p.grad for p in net.parameters()),
        optimizer_state=optimizer_state_bytes(opt),
        activations=saved.total - saved.parameter_bytes,
        saved_total=saved.total,
        forward_passes=round(forwards / (2 if allocator else 1)),  # with the allocator's count, two micro-steps ran
        peak=peak.peak,
        allocator_peak=allocated,
    )
