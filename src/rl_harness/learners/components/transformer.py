"""Small causal (decoder-only) transformer over a fixed context window."""

from __future__ import annotations

import torch
from torch import nn

from rl_harness.learners.components._checks import positive_int


class CausalTransformerEncoder(nn.Module):
    """Pre-norm causal transformer: a window of W <= context_len positions -> (B, W, d_model).

    Inputs are either features (B, W, input_dim), projected linearly, or, with
    `token_input=True`, integer token ids (B, W) in [0, input_dim), embedded.
    Positions are learned. Position i attends to positions <= i only, so the
    last position summarises the whole window.
    """

    def __init__(
        self,
        *,
        input_dim: int,
        context_len: int,
        d_model: int = 64,
        num_heads: int = 4,
        num_layers: int = 2,
        ff_dim: int | None = None,
        dropout: float = 0.0,
        token_input: bool = False,
    ) -> None:
        super().__init__()
        self.input_dim = positive_int("input_dim", input_dim)
        self.context_len = positive_int("context_len", context_len)
        self.d_model = positive_int("d_model", d_model)
        positive_int("num_heads", num_heads)
        positive_int("num_layers", num_layers)
        ff_dim = 4 * d_model if ff_dim is None else positive_int("ff_dim", ff_dim)
        if d_model % num_heads != 0:
            raise ValueError(f"d_model ({d_model}) must be divisible by num_heads ({num_heads})")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {dropout!r}")
        self.token_input = token_input
        self.embed: nn.Module = (
            nn.Embedding(input_dim, d_model) if token_input else nn.Linear(input_dim, d_model)
        )
        self.position = nn.Parameter(torch.zeros(context_len, d_model))
        nn.init.normal_(self.position, std=0.02)
        layer = nn.TransformerEncoderLayer(
            d_model,
            num_heads,
            dim_feedforward=ff_dim,
            dropout=dropout,
            activation="gelu",
            batch_first=True,
            norm_first=True,
        )
        # Nested tensors only apply to padding masks, which a fixed window never has.
        self.layers = nn.TransformerEncoder(layer, num_layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(d_model)
        mask = torch.triu(torch.full((context_len, context_len), float("-inf")), diagonal=1)
        self.register_buffer("causal_mask", mask, persistent=False)
        self.output_dim = d_model

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Per-position embeddings (B, W, d_model)."""
        if self.token_input:
            if x.dim() != 2 or x.is_floating_point():
                raise ValueError(f"expected integer tokens (B, W), got {x.dtype} {tuple(x.shape)}")
            h = self.embed(x.long())
        else:
            if x.dim() != 3 or x.shape[-1] != self.input_dim:
                raise ValueError(f"expected (B, W, {self.input_dim}) inputs, got {tuple(x.shape)}")
            h = self.embed(x)
        width = h.shape[1]
        if width > self.context_len:
            raise ValueError(f"window of {width} positions exceeds context_len {self.context_len}")
        h = h + self.position[:width]
        h = self.layers(h, mask=self.causal_mask[:width, :width], is_causal=True)
        return self.norm(h)

    def last_position(self, x: torch.Tensor) -> torch.Tensor:
        """The last position's embedding (B, d_model)."""
        return self.forward(x)[:, -1]
