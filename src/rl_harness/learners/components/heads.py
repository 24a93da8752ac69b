"""Output heads: an optional hidden MLP followed by one linear layer."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from rl_harness.learners.components._checks import positive_int, positive_sizes
from rl_harness.learners.components.mlp import make_activation


class MLPHead(nn.Module):
    """(..., input_dim) -> (..., output_dim), no activation on the output.

    `output_scale` multiplies the initial output weights (bias starts at zero):
    a small value (e.g. 0.01 for policy logits) starts near a uniform policy.
    """

    def __init__(
        self,
        input_dim: int,
        output_dim: int,
        hidden_sizes: Sequence[int] = (),
        activation: str = "tanh",
        output_scale: float = 1.0,
    ) -> None:
        super().__init__()
        in_dim = positive_int("input_dim", input_dim)
        positive_int("output_dim", output_dim)
        if not output_scale > 0:
            raise ValueError(f"output_scale must be positive, got {output_scale!r}")
        layers: list[nn.Module] = []
        for size in positive_sizes("hidden_sizes", hidden_sizes, allow_empty=True):
            layers += [nn.Linear(in_dim, size), make_activation(activation)]
            in_dim = size
        out = nn.Linear(in_dim, output_dim)
        with torch.no_grad():
            out.weight.mul_(output_scale)
            out.bias.zero_()
        layers.append(out)
        self.net = nn.Sequential(*layers)
        self.input_dim = input_dim
        self.output_dim = output_dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.net(x)
        return out
