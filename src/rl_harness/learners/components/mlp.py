"""Multi-layer perceptron encoder."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from rl_harness.learners.components._checks import positive_int, positive_sizes

ACTIVATIONS: dict[str, type[nn.Module]] = {
    "tanh": nn.Tanh,
    "relu": nn.ReLU,
    "gelu": nn.GELU,
    "silu": nn.SiLU,
}


def make_activation(name: str) -> nn.Module:
    """A fresh activation module by name (one of ACTIVATIONS)."""
    if name not in ACTIVATIONS:
        raise ValueError(f"unknown activation {name!r}; choose one of {sorted(ACTIVATIONS)}")
    return ACTIVATIONS[name]()


class MLPEncoder(nn.Module):
    """Linear + activation layers: (..., input_dim) -> (..., hidden_sizes[-1]).

    Every layer, the last included, ends in the activation: the output is a
    representation, not a prediction (heads add the final linear map).
    """

    def __init__(
        self, input_dim: int, hidden_sizes: Sequence[int], activation: str = "tanh"
    ) -> None:
        super().__init__()
        in_dim = positive_int("input_dim", input_dim)
        sizes = positive_sizes("hidden_sizes", hidden_sizes, allow_empty=False)
        layers: list[nn.Module] = []
        for size in sizes:
            layers += [nn.Linear(in_dim, size), make_activation(activation)]
            in_dim = size
        self.net = nn.Sequential(*layers)
        self.input_dim = input_dim
        self.output_dim = sizes[-1]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[-1] != self.input_dim:
            raise ValueError(f"MLPEncoder expects last dim {self.input_dim}, got {tuple(x.shape)}")
        out: torch.Tensor = self.net(x)
        return out
