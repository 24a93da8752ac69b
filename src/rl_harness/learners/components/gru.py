"""GRU sequence encoder with a batch-first recurrent state."""

from __future__ import annotations

import torch
from torch import nn

from rl_harness.learners.components._checks import positive_int


class GRUEncoder(nn.Module):
    """Multi-layer GRU over (B, T, input_dim) sequences.

    The state is batch-first, (B, num_layers, hidden_size), so one sample's
    state is a (num_layers, hidden_size) array: the layout RLlib batches
    STATE_IN/STATE_OUT in.
    """

    def __init__(self, input_dim: int, hidden_size: int, num_layers: int = 1) -> None:
        super().__init__()
        self.input_dim = positive_int("input_dim", input_dim)
        self.hidden_size = positive_int("hidden_size", hidden_size)
        self.num_layers = positive_int("num_layers", num_layers)
        self.gru = nn.GRU(input_dim, hidden_size, num_layers=num_layers, batch_first=True)
        self.output_dim = hidden_size

    def initial_state(self, batch_size: int, device: torch.device | None = None) -> torch.Tensor:
        """Zeros of shape (batch_size, num_layers, hidden_size)."""
        return torch.zeros(batch_size, self.num_layers, self.hidden_size, device=device)

    def forward(
        self, x: torch.Tensor, state: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Returns (last-layer hidden state after each step (B, T, H), final state (B, L, H))."""
        if x.dim() != 3 or x.shape[-1] != self.input_dim:
            raise ValueError(
                f"GRUEncoder expects (B, T, {self.input_dim}) inputs, got {tuple(x.shape)}"
            )
        batch = x.shape[0]
        if state is None:
            state = self.initial_state(batch, device=x.device)
        expected = (batch, self.num_layers, self.hidden_size)
        if tuple(state.shape) != expected:
            raise ValueError(f"GRUEncoder expects state {expected}, got {tuple(state.shape)}")
        # nn.GRU wants the layer dim first: (L, B, H).
        outputs, h_n = self.gru(x, state.transpose(0, 1).contiguous())
        return outputs, h_n.transpose(0, 1)
