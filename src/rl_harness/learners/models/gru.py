"""Recurrent (GRU) actor-critic with RLlib state handling."""

from __future__ import annotations

from typing import Any, ClassVar, cast

import numpy as np
import torch
from ray.rllib.core.columns import Columns
from ray.rllib.core.rl_module.rl_module import RLModule
from ray.rllib.utils.annotations import override

from rl_harness.learners.components import GRUEncoder
from rl_harness.learners.models.base import ActorCriticRLModule
from rl_harness.learners.models.model_config import config_int
from rl_harness.learners.models.spaces import flat_feature_dim, flat_features


class GRUActorCritic(ActorCriticRLModule):
    """GRU trunk over the per-step flattened observation (discrete parts one-hot).

    model_config: "max_seq_len" (required: RLlib's training sequence length),
    "hidden_size" (default 64), "num_layers" (default 1), plus the shared keys, the
    initialisation among them: "init" "torch_default" (default) or "normal" (every GRU
    weight matrix N(0, "init_std"), every GRU bias 0), "pi_output_scale" (0.01),
    "vf_output_scale" (1.0).

    Stateful: RLlib adds the time dim, so obs is (B, T, *obs_shape) (T = 1 when
    acting) and STATE_IN/STATE_OUT is {"h": (B, num_layers, hidden_size)}.
    `encode(batch)` returns the last layer's hidden state after each step,
    shape (B, T, hidden_size); it starts from zeros when the batch has no STATE_IN.
    """

    MODEL_CONFIG_KEYS: ClassVar[tuple[str, ...]] = ("max_seq_len", "hidden_size", "num_layers")

    def setup_trunk(self, config: dict[str, Any]) -> int:
        if config.get("max_seq_len") is None:
            raise ValueError(
                "GRUActorCritic needs model_config['max_seq_len'] (the length of the "
                "sequences RLlib cuts episodes into for training), e.g. 32"
            )
        config_int(config, "max_seq_len")  # checked here; RLlib reads it from model_config
        self.gru = GRUEncoder(
            flat_feature_dim(self._observation_space()),
            config_int(config, "hidden_size", 64),
            config_int(config, "num_layers", 1),
        )
        return self.gru.output_dim

    def input_parameters(self) -> list[torch.nn.Parameter]:
        # nn.GRU's input-to-hidden weights are Parameters (typed as Tensor | Module by torch).
        return [cast(torch.nn.Parameter, self.gru.gru.weight_ih_l0)]

    @override(RLModule)
    def get_initial_state(self) -> dict[str, np.ndarray]:
        return {"h": np.zeros((self.gru.num_layers, self.gru.hidden_size), dtype=np.float32)}

    def representation(self, batch: dict[str, Any]) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        obs = batch[Columns.OBS]
        obs_shape = self._observation_space().shape or ()
        if obs.dim() != 2 + len(obs_shape):
            raise ValueError(
                f"GRUActorCritic expects obs of shape (B, T, *{obs_shape}), got {tuple(obs.shape)}"
            )
        state_in = batch.get(Columns.STATE_IN)
        h0 = None if state_in is None else state_in["h"]
        outputs, h_n = self.gru(flat_features(obs, self._observation_space(), 2), h0)
        return outputs, {"h": h_n}
