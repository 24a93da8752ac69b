"""Causal-transformer actor-critic that carries its own context as RLlib recurrent state.

`StatefulTransformerActorCritic` reads one token per step: the step's observation
(flattened, discrete parts one-hot) and, by default, the previous action (one-hot for
Discrete, the sampled vector for a Box). Each step attends to itself and the
`context - 1` steps before it (rotary positions, pre-norm blocks; see
`components.stateful_transformer`). Acting costs one step of attention: the env runner
carries the per-layer key/value cache of the last `context - 1` steps as STATE_IN /
STATE_OUT. Training runs each `max_seq_len` chunk from the cache RLlib stored at the
chunk's start, so it sees exactly the context acting saw.

model_config keys:
  "max_seq_len"  (required) RLlib's training chunk length, e.g. 64.
  "context"      steps each position sees, itself included (default 64, >= 2).
  "d_model"      width (default 64); "num_heads" (4); "num_layers" (2);
  "ff_dim"       MLP width (default 4 * d_model).
  "prev_action"  feed the previous action (default True): needs the `prev_actions`
                 column, so install `PrevActionToBatch` on both sides:
                 config.env_runners(env_to_module_connector=prev_action_env_to_module)
                 config.learners(learner_connector=prev_action_learner)
                 (`store_kv_steps` installs the env runner's side itself).
  "whole_cache_per_step"  False (default): training needs `store_kv_steps(config)`; a run
                 without it is refused before Ray starts (`check_algorithm_config`, the
                 harness's preflight). True: RLlib stores the whole cache at every env
                 step (its own pieces; tests and comparisons with that path).
  plus the shared "head_hidden_sizes" and "activation" of ActorCriticRLModule, and its
  initialisation keys: "init" "torch_default" (default) or "normal" (every trunk weight
  N(0, "init_std" = 0.02), biases 0, LayerNorms (1, 0), the input projection without a
  bias), "pi_output_scale" (0.01), "vf_output_scale" (1.0).
Unknown keys fail.

State (per sample): {"k", "v": (num_layers, context - 1, d_model) float32,
"n": (1,) int64 filled slots}. Representation (what probes read): the final normed
residual stream. `encode(batch)` -> (B, T, d_model) for a (B, T, ...) batch (from
STATE_IN, or an empty cache); `encode_step(batch)` -> ((B, d_model), state out) for
one step without a time dim; `encode_step_residuals` every depth of it, and
`encode_step_edited(batch, layer, edit)` the step with one depth's residual edited and the
rest of the module run from there (causal interventions; heads via `forward_heads`).

Cost: by default RLlib stores STATE_OUT at every env step, so the whole cache is copied per
step (2 * num_layers * (context - 1) * d_model floats: 145 KB at d_model 96, 3 layers,
context 64). `store_kv_steps(config)` (`learners.connectors.kv_cache`) stores each step's
new key/value only and rebuilds each training chunk's start cache in the learner, and its
acting connectors work on whole batches. Acting costs one step of attention over the cache
instead of re-encoding the window. RLlib's per-step connector work is paid per vector step,
so with few env copies per runner it dominates sampling: on 2 cores (cpu-local,
num_env_runners=0) use 32-64 (`num_envs_per_env_runner`), and leave torch its default
threads so the update uses both cores. Measured memory and throughput, with their dates and
commits: docs/performance.md (`bench/flagship_throughput.py compare` and `scale`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar, cast

import gymnasium as gym
import numpy as np
import torch
from ray.rllib.core.columns import Columns
from ray.rllib.core.rl_module.rl_module import RLModule
from ray.rllib.utils.annotations import override

from rl_harness.learners.components.stateful_transformer import StatefulTransformerEncoder
from rl_harness.learners.connectors.kv_cache import WHOLE_CACHE_PER_STEP, check_kv_steps_installed
from rl_harness.learners.connectors.prev_action import PREV_ACTIONS
from rl_harness.learners.models.base import ActorCriticRLModule
from rl_harness.learners.models.model_config import config_bool, config_int
from rl_harness.learners.models.spaces import flat_feature_dim, flat_features


def _prev_action_dim(space: gym.Space[Any]) -> int:
    if isinstance(space, gym.spaces.Discrete):
        return int(space.n)
    if isinstance(space, gym.spaces.Box) and len(space.shape) == 1:
        return int(space.shape[0])
    raise ValueError(f"unsupported action space {space}: use Discrete or a 1-D Box")


class StatefulTransformerActorCritic(ActorCriticRLModule):
    """Causal transformer over the agent's own past steps, with a carried K/V cache.

    Analysis contracts: the base's plus `StepEncoderAPI` (`encode_step`),
    `ResidualStreamAPI` (`encode_step_residuals`), `SequenceResidualAPI`
    (`encode_sequence_residuals`), `ResidualEditAPI` (`encode_step_edited`) and
    `PrevActionInputAPI` (`prev_action_width`)."""

    MODEL_CONFIG_KEYS: ClassVar[tuple[str, ...]] = (
        "max_seq_len",
        "context",
        "d_model",
        "num_heads",
        "num_layers",
        "ff_dim",
        "prev_action",
        WHOLE_CACHE_PER_STEP,
    )

    def setup_trunk(self, config: dict[str, Any]) -> int:
        if config.get("max_seq_len") is None:
            raise ValueError(
                "StatefulTransformerActorCritic needs model_config['max_seq_len'] (the length "
                "of the chunks RLlib trains on), e.g. 64"
            )
        config_int(config, "max_seq_len")  # checked here; RLlib reads it from model_config
        self.use_prev_action = config_bool(config, "prev_action", True)
        self.whole_cache_per_step = config_bool(config, WHOLE_CACHE_PER_STEP, False)
        self.obs_dim = flat_feature_dim(self._observation_space())
        self.action_dim = _prev_action_dim(self._action_space()) if self.use_prev_action else 0
        d_model = config_int(config, "d_model", 64)
        context = config_int(config, "context", 64)
        if context < 2:
            raise ValueError(f"model_config['context'] must be at least 2, got {context}")
        self.transformer = StatefulTransformerEncoder(
            input_dim=self.obs_dim + self.action_dim,
            context=context,
            d_model=d_model,
            num_heads=config_int(config, "num_heads", 4),
            num_layers=config_int(config, "num_layers", 2),
            ff_dim=config_int(config, "ff_dim", 4 * d_model),
            input_bias=self.init.input_bias,
        )
        return d_model

    def check_algorithm_config(self, config: Any) -> None:
        """Refuse a training config without `store_kv_steps` (ValueError naming it) unless
        model_config["whole_cache_per_step"] is True. The harness's preflight calls this
        before Ray starts (a module's `check_algorithm_config`, if it has one)."""
        if self.whole_cache_per_step:
            return
        enc = self.transformer
        floats = 2 * enc.num_layers * (enc.context - 1) * enc.d_model
        check_kv_steps_installed(config, bytes_per_step=4 * floats)

    @override(RLModule)
    def get_initial_state(self) -> dict[str, np.ndarray]:
        enc = self.transformer
        shape = (enc.num_layers, enc.context - 1, enc.d_model)
        return {
            "k": np.zeros(shape, np.float32),
            "v": np.zeros(shape, np.float32),
            "n": np.zeros((1,), np.int64),
        }

    def prev_action_width(self) -> int:
        """Floats of the `prev_actions` column this module reads per step (0: it reads none);
        analysis (`ModuleStepper`) writes the column the connectors write when acting."""
        return self.action_dim

    def input_parameters(self) -> list[torch.nn.Parameter]:
        # nn.Linear's weight is a Parameter (typed as Tensor by torch).
        return [cast(torch.nn.Parameter, self.transformer.embed.weight)]

    def _inputs(self, batch: dict[str, Any]) -> torch.Tensor:
        obs = batch[Columns.OBS]
        space = self._observation_space()
        obs_shape = space.shape or ()
        if obs.dim() != 2 + len(obs_shape):
            raise ValueError(
                f"{type(self).__name__} expects obs of shape (B, T, "
                f"*{space.shape}) or, one step per row, (B, "
                f"*{space.shape}), got {tuple(obs.shape)}"
            )
        features = flat_features(obs, space, 2)
        if not self.use_prev_action:
            return features
        if PREV_ACTIONS not in batch:
            raise KeyError(
                f"{type(self).__name__} reads the previous action from the batch column "
                f"{PREV_ACTIONS!r}: install PrevActionToBatch (prev_action_env_to_module, "
                "prev_action_learner) or set model_config['prev_action'] = False"
            )
        prev = batch[PREV_ACTIONS].to(features.dtype)
        return torch.cat((features, prev.reshape(*features.shape[:2], self.action_dim)), -1)

    def representation(self, batch: dict[str, Any]) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        if batch[Columns.OBS].dim() == 1 + len(self._observation_space().shape or ()):
            # No time dim: one step per row (the acting batches store_kv_steps builds).
            return self.encode_step(batch)
        out: tuple[torch.Tensor, dict[str, torch.Tensor]] = self.transformer(
            self._inputs(batch), self._state_in(batch)
        )
        return out

    def _state_in(self, batch: dict[str, Any]) -> dict[str, torch.Tensor] | None:
        state = batch.get(Columns.STATE_IN)
        if state is not None and "k" not in state:
            # RLlib's own state piece read the per-step K/V that KVStepsToEpisodes stores.
            raise ValueError(
                f"{type(self).__name__} got STATE_IN with keys {sorted(state)}, not the K/V "
                "cache: the env runner stores per-step K/V but this pipeline lacks the piece "
                "that rebuilds the cache; install all of it with "
                "rl_harness.learners.models.store_kv_steps(config)"
            )
        return state

    def _step_inputs(self, batch: dict[str, Any]) -> torch.Tensor:
        """One step without a time dim -> the (B, 1, input_dim) token."""
        stepped = {Columns.OBS: batch[Columns.OBS].unsqueeze(1)}
        if PREV_ACTIONS in batch:
            stepped[PREV_ACTIONS] = batch[PREV_ACTIONS].unsqueeze(1)
        return self._inputs(stepped)

    def encode_step(self, batch: dict[str, Any]) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """One step without a time dim: obs (B, *obs_shape), `prev_actions` (B, A) if used,
        STATE_IN (or none: an empty cache) -> (representation (B, d_model), state out).
        """
        representation, state = self.transformer(self._step_inputs(batch), self._state_in(batch))
        return representation[:, 0], state

    def encode_step_residuals(
        self, batch: dict[str, Any]
    ) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
        """`encode_step` with the residual stream at every depth: (residuals, state out).

        residuals maps "embed" (input to block 1), "block_1" ... "block_L" (after each
        block, before the final norm) and "final_norm" (after it: exactly `encode_step`'s
        representation) to (B, d_model) tensors. Same inputs and state as `encode_step`.
        """
        residuals, state = self.transformer.forward_residuals(
            self._step_inputs(batch), self._state_in(batch)
        )
        return {name: r[:, 0] for name, r in residuals.items()}, state

    def encode_sequence_residuals(
        self, batch: dict[str, Any]
    ) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
        """`encode_step_residuals` of T steps in one call (analysis replays many steps at
        once): obs (B, T, *obs_shape) (and `prev_actions` (B, T, A) if used), STATE_IN the
        cache before the first step -> ({name: (B, T, d_model)}, the cache after the last).
        The same windowed attention as T single steps; equal to them up to float rounding
        (the batched kernels sum in another order)."""
        return self.transformer.forward_residuals(self._inputs(batch), self._state_in(batch))

    def encode_step_edited(
        self,
        batch: dict[str, Any],
        layer: str,
        edit: Callable[[torch.Tensor], torch.Tensor],
    ) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
        """`encode_step` with the residual at `layer` (a name of `encode_step_residuals`)
        replaced by `edit(residual)`, (B, d_model) -> (B, d_model), and the rest of the module
        run from there; heads read the result through `forward_heads`.

        Returns (the residual at `layer` before the edit (B, d_model), the representation
        the heads read (B, d_model), state out). STATE_IN is not modified; the state out
        holds this step's keys/values as the edited pass computed them (the edit carried
        to later steps): to leave the cache unedited, carry `encode_step`'s state instead.
        """

        def edit_step(residual: torch.Tensor) -> torch.Tensor:  # (B, 1, D): one step
            return edit(residual[:, 0]).unsqueeze(1)

        representation, before, state = self.transformer.forward_edited(
            self._step_inputs(batch), self._state_in(batch), layer, edit_step
        )
        return before[:, 0], representation[:, 0], state
