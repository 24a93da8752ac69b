"""Feed-forward actor-critic."""

from __future__ import annotations

from typing import Any, ClassVar, cast

import torch
from ray.rllib.core.columns import Columns

from rl_harness.learners.components import ACTIVATIONS, MLPEncoder
from rl_harness.learners.models.base import ActorCriticRLModule
from rl_harness.learners.models.model_config import config_choice, config_sizes
from rl_harness.learners.models.spaces import flat_feature_dim, flat_features


class MLPActorCritic(ActorCriticRLModule):
    """MLP trunk over the flattened observation (discrete parts one-hot).

    model_config: "hidden_sizes" (default [64, 64]), plus the shared keys of
    ActorCriticRLModule, the initialisation among them: "init" "torch_default" (default) or
    "normal" (every encoder Linear N(0, "init_std"), biases 0), "pi_output_scale" (0.01),
    "vf_output_scale" (1.0). `encode(batch)` returns the last hidden layer,
    shape (B, hidden_sizes[-1]) (or (B, T, ...) if obs has a time dim).
    """

    MODEL_CONFIG_KEYS: ClassVar[tuple[str, ...]] = ("hidden_sizes",)

    def setup_trunk(self, config: dict[str, Any]) -> int:
        self._lead_dims = 1
        self.encoder = MLPEncoder(
            flat_feature_dim(self._observation_space()),
            config_sizes(config, "hidden_sizes", (64, 64), allow_empty=False),
            config_choice(config, "activation", "tanh", ACTIVATIONS),
        )
        return self.encoder.output_dim

    def input_parameters(self) -> list[torch.nn.Parameter]:
        # The first layer is an nn.Linear (MLPEncoder): its weight is a Parameter.
        return [cast(torch.nn.Parameter, self.encoder.net[0].weight)]

    def representation(self, batch: dict[str, Any]) -> tuple[torch.Tensor, None]:
        obs = batch[Columns.OBS]
        # Everything before the observation's own dims is batch (and maybe time).
        space = self._observation_space()
        lead_dims = obs.dim() - len(space.shape or ())
        features: torch.Tensor = self.encoder(flat_features(obs, space, lead_dims))
        return features, None
