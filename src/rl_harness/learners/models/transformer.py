"""Causal-transformer actor-critic over a fixed observation window."""

from __future__ import annotations

from typing import Any, ClassVar

import torch
from ray.rllib.core.columns import Columns

from rl_harness.learners.components import CausalTransformerEncoder
from rl_harness.learners.models.base import ActorCriticRLModule
from rl_harness.learners.models.model_config import config_float, config_int
from rl_harness.learners.models.spaces import window_inputs, window_layout


class TransformerActorCritic(ActorCriticRLModule):
    """Causal transformer over the window each observation carries; stateless.

    The observation is the window (see `spaces.window_layout`): Box (W, D),
    Box (W * D,) with "context_len" = W, or MultiDiscrete (W,) token ids.
    model_config: "context_len" (optional check, required for flat Box),
    "d_model" (64), "num_heads" (4), "num_layers" (2), "ff_dim" (4 * d_model),
    "dropout" (0.0), plus the shared keys. `encode(batch)` returns the last
    position's embedding, shape (B, d_model).
    """

    MODEL_CONFIG_KEYS: ClassVar[tuple[str, ...]] = (
        "context_len",
        "d_model",
        "num_heads",
        "num_layers",
        "ff_dim",
        "dropout",
    )

    def setup_trunk(self, config: dict[str, Any]) -> int:
        context_len = config.get("context_len")
        if context_len is not None:
            context_len = config_int(config, "context_len")
        self.layout = window_layout(self.observation_space, context_len)
        d_model = config_int(config, "d_model", 64)
        self.transformer = CausalTransformerEncoder(
            input_dim=self.layout.feature_dim,
            context_len=self.layout.width,
            d_model=d_model,
            num_heads=config_int(config, "num_heads", 4),
            num_layers=config_int(config, "num_layers", 2),
            ff_dim=config_int(config, "ff_dim", 4 * d_model),
            dropout=config_float(config, "dropout", 0.0, low=0.0, high=1.0),
            token_input=self.layout.tokens,
        )
        return d_model

    def input_parameters(self) -> list[torch.nn.Parameter]:
        return [self.transformer.embed.weight, self.transformer.position]

    def representation(self, batch: dict[str, Any]) -> tuple[torch.Tensor, None]:
        x = window_inputs(batch[Columns.OBS], self.layout)
        return self.transformer.last_position(x), None
