"""Watch a learner's function from outside: how many backward passes reach a model, and how many
examples each one carried. Torch only.

"Micro-batches" that secretly go through one big backward (the losses summed first, or the
inputs concatenated) give the right gradient but keep every activation alive at once, which is
what accumulation exists to avoid. Reading source cannot tell; hooks can:

- a forward hook notes each forward's number of examples and hooks its output tensor, which
  fires when a backward pass flows through that forward;
- a post-accumulate hook on one parameter fires once per backward pass that reaches it, however
  many forwards the pass went through, and closes the pass.

So `passes[j]` lists the forwards (by their number of examples) that backward pass j went
through: `[2]` for an honest micro-step, `[2, 2, 2, 2]` for four micro-batches summed into one
backward, `[8]` for one big forward. `before[j]`, `incoming[j]` and `after[j]` hold `.grad` of
that parameter before the pass, what the pass added, and `.grad` after it (flat copies).
"""
from __future__ import annotations

import torch


def _flat(t: torch.Tensor | None) -> torch.Tensor | None:
    return None if t is None else t.detach().reshape(-1).clone()


class BackwardWatch:
    """`with BackwardWatch(model) as watch: learner(model, ...)`; then read `watch.passes`, `watch.forwards`."""

    def __init__(self, model: torch.nn.Module, parameter: torch.nn.Parameter | None = None):
        self.model = model
        self.parameter = parameter if parameter is not None else next(model.parameters())
        self.forwards: list[int] = []  # examples of each forward that can be backpropagated
        self.passes: list[list[int]] = []
        self.before: list[torch.Tensor | None] = []
        self.incoming: list[torch.Tensor] = []
        self.after: list[torch.Tensor] = []
        self.weights: list[torch.Tensor] = []  # the parameter's value at each pass
        self._open: list[int] = []
        self._handles: list = []

    def __enter__(self) -> "BackwardWatch":
        p = self.parameter
        self._handles = [
            self.model.register_forward_hook(self._on_forward),
            p.register_hook(self._on_incoming),  # runs before the gradient is added to .grad
            p.register_post_accumulate_grad_hook(self._on_accumulated),
        ]
        return self

    def __exit__(self, *exc) -> None:
        for handle in self._handles:
            handle.remove()

    def _on_forward(self, module, args, output) -> None:
        if isinstance(output, torch.Tensor) and output.requires_grad:
            n = output.shape[0] if output.dim() else 1
            self.forwards.append(n)
            output.register_hook(lambda grad, n=n: self._open.append(n))

    def _on_incoming(self, grad: torch.Tensor) -> None:
        self.before.append(_flat(self.parameter.grad))
        self.incoming.append(_flat(grad))
        self.weights.append(_flat(self.parameter))

    def _on_accumulated(self, p: torch.Tensor) -> None:
        self.passes.append(self._open)
        self.after.append(_flat(p.grad))
        self._open = []
