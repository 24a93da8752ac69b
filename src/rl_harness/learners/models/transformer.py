"""Causal-transformer actor-critic over a fixed observation window."""

from __future__ import annotations

from typing import Any, ClassVar, cast

import torch
from ray.rllib.core.columns import Columns
from ray.rllib.utils.annotations import override

from rl_harness.learners.components import CausalTransformerEncoder
from rl_harness.learners.components.transformer import MLP_ACTIVATIONS, POSITIONS
from rl_harness.learners.models.base import ActorCriticRLModule
from rl_harness.learners.models.model_config import (
    config_bool,
    config_choice,
    config_float,
    config_int,
)
from rl_harness.learners.models.spaces import window_inputs, window_layout

# The learner's forward: every window in full, or each distinct prefix of the batch once.
TRAIN_FORWARDS = ("per_window", "prefix_shared")


class TransformerActorCritic(ActorCriticRLModule):
    """Causal transformer over the window each observation carries; stateless. Analysis
    contracts: the base's plus `ResidualStreamAPI` (`encode_step_residuals`).

    The observation is the window (see `spaces.window_layout`): Box (W, D), Box (W * D,)
    with "context_len" = W and "feature_dim" = D, MultiDiscrete (W,) token ids, or a Dict
    whose "window_keys" (each a Box (W, D_k)) form each position. A shape that does not
    match fails at build; positions are never guessed. The model reads the newest
    "window" positions of it, oldest first, so its last position holds the newest step and
    `encode(batch)` (that position's final normed residual, (B, d_model)) has seen the whole
    window and nothing older.

    model_config keys:
      "context_len"    positions in the observation (optional check; required for a flat Box)
      "feature_dim"    floats per position (optional check; required for a flat Box)
      "window_keys"    Dict observations: the keys forming each position, in order (e.g.
                       ["tokens", "actions"] on the HMM env with "dict_observation": true)
      "window"         positions read: the newest `window` of them (default all W); the
                       window is strict, older positions never reach the output
      "newest_first"   the observation lists its positions newest first, as the HMM env's
                       token window does (default False: oldest first); the model flips them
      "d_model" (64), "num_heads" (4), "num_layers" (2), "ff_dim" (4 * d_model),
      "d_head"         each head's width (default d_model / num_heads)
      "mlp_activation" "gelu" (default) or "relu"
      "positions"      "learned" (default) or "rotary"
      "final_norm"     LayerNorm after the last block (default True)
      "dropout" (0.0), plus the shared "head_hidden_sizes" and "activation" (the heads').
      "init"           "torch_default" (default) or "normal": every trunk weight (input
                       projection or token embedding, attention, MLP, learned positions)
                       N(0, "init_std" = 0.02), biases 0, LayerNorms (1, 0), and the linear
                       input projection built without a bias
      "pi_output_scale" (0.01), "vf_output_scale" (1.0): the heads' last-layer factors.
      "train_forward"  how the learner computes the representation (`_forward_train`,
                       `compute_values`): "per_window" (default: every window in full, as
                       acting does) or "prefix_shared" (each distinct window prefix of the
                       batch once, `CausalTransformerEncoder.last_position_prefix_shared`:
                       the same function and parameters to float summation order, several
                       times cheaper on overlapping windows; needs dropout 0). Acting,
                       `encode` and `encode_step_residuals` always run per window.
    The original belief-geometry study's init: {"init": "normal", "init_std": 0.02,
    "pi_output_scale": 1.0, "vf_output_scale": 1.0}.

    The belief-geometry paper's transformer (Shai et al. 2024) on the HMM env's 10-token
    window: {"context_len": 10, "feature_dim": 3, "newest_first": True, "d_model": 64,
    "num_layers": 4, "num_heads": 1, "d_head": 8, "ff_dim": 256, "mlp_activation": "relu",
    "positions": "learned"}.

    `encode_step_residuals(batch)` reads every depth of the residual stream at the last
    position, like StatefulTransformerActorCritic's (state out: {}, the module is stateless).
    """

    MODEL_CONFIG_KEYS: ClassVar[tuple[str, ...]] = (
        "context_len",
        "feature_dim",
        "window_keys",
        "window",
        "newest_first",
        "d_model",
        "num_heads",
        "num_layers",
        "ff_dim",
        "d_head",
        "mlp_activation",
        "positions",
        "final_norm",
        "dropout",
        "train_forward",
    )

    def setup_trunk(self, config: dict[str, Any]) -> int:
        context_len = config.get("context_len")
        if context_len is not None:
            context_len = config_int(config, "context_len")
        feature_dim = config.get("feature_dim")
        if feature_dim is not None:
            feature_dim = config_int(config, "feature_dim")
        keys = config.get("window_keys")
        if keys is not None and (
            not isinstance(keys, list | tuple) or not all(isinstance(k, str) for k in keys)
        ):
            raise ValueError(f"model_config['window_keys'] must be a list of keys, got {keys!r}")
        self.layout = window_layout(
            self._observation_space(),
            context_len,
            feature_dim,
            None if keys is None else tuple(keys),
        )
        self.window = config_int(config, "window", self.layout.width)
        if self.window > self.layout.width:
            raise ValueError(
                f"model_config['window'] = {self.window} exceeds the observation's window of "
                f"{self.layout.width} positions"
            )
        self.newest_first = config_bool(config, "newest_first", False)
        d_model = config_int(config, "d_model", 64)
        num_heads = config_int(config, "num_heads", 4)
        d_head = config.get("d_head")
        if d_head is None and d_model % num_heads != 0:
            raise ValueError(
                f"model_config['d_model'] ({d_model}) must be divisible by "
                f"model_config['num_heads'] ({num_heads}), or set model_config['d_head']"
            )
        d_head = config_int(config, "d_head", d_model // num_heads)
        positions = config_choice(config, "positions", "learned", POSITIONS)
        if positions == "rotary" and d_head % 2 != 0:
            raise ValueError(
                f"model_config['positions'] = 'rotary' needs an even head width, got "
                f"model_config['d_head'] = {d_head}"
            )
        dropout = config_float(config, "dropout", 0.0, low=0.0, high=1.0)
        self.train_forward = config_choice(config, "train_forward", "per_window", TRAIN_FORWARDS)
        if self.train_forward == "prefix_shared" and dropout > 0:
            raise ValueError(
                "model_config['train_forward'] = 'prefix_shared' needs model_config['dropout'] "
                f"= 0 (windows sharing a prefix would share its dropout masks), got {dropout}"
            )
        self.transformer = CausalTransformerEncoder(
            input_dim=self.layout.feature_dim,
            context_len=self.window,
            d_model=d_model,
            num_heads=num_heads,
            num_layers=config_int(config, "num_layers", 2),
            ff_dim=config_int(config, "ff_dim", 4 * d_model),
            dropout=dropout,
            token_input=self.layout.tokens,
            d_head=d_head,
            activation=config_choice(config, "mlp_activation", "gelu", MLP_ACTIVATIONS),
            positions=positions,
            final_norm=config_bool(config, "final_norm", True),
            input_bias=self.init.input_bias,
        )
        return d_model

    def input_parameters(self) -> list[torch.nn.Parameter]:
        position = self.transformer.position
        # The embedding is an nn.Embedding or nn.Linear: its weight is a Parameter.
        embed = cast(torch.nn.Parameter, self.transformer.embed.weight)
        return [embed] + ([position] if position is not None else [])

    def _window(self, batch: dict[str, Any]) -> torch.Tensor:
        """The model's input: the newest `window` positions, oldest first."""
        x = window_inputs(batch[Columns.OBS], self.layout)
        if self.newest_first:
            x = x[:, : self.window].flip(1)
        else:
            x = x[:, x.shape[1] - self.window :]
        return x

    def representation(self, batch: dict[str, Any]) -> tuple[torch.Tensor, None]:
        return self.transformer.last_position(self._window(batch)), None

    @override(ActorCriticRLModule)
    def training_representation(self, batch: dict[str, Any]) -> tuple[torch.Tensor, None]:
        if self.train_forward == "prefix_shared":
            return self.transformer.last_position_prefix_shared(self._window(batch)), None
        return self.representation(batch)

    def encode_step_residuals(
        self, batch: dict[str, Any]
    ) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
        """Every depth of the residual stream at the last (newest) position: (residuals, {}).

        residuals maps "embed" (input to block 1), "block_1" ... "block_L" (after each
        block, before the final norm) and "final_norm" (after it: exactly `encode`'s
        representation, what the heads read; without a final norm, "block_L" itself) to
        (B, d_model) tensors. The batch is the one `encode` takes (obs (B, *obs_shape)); the
        state out is {} (stateless), the contract of the stateful transformer's method.
        """
        residuals = self.transformer.forward_residuals(self._window(batch))
        return {name: r[:, -1] for name, r in residuals.items()}, {}
