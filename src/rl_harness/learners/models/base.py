"""Shared shape of the actor-critic RLModules: trunk -> representation -> pi / vf heads."""

from __future__ import annotations

import abc
from typing import Any, ClassVar

import gymnasium as gym
import torch
from ray.rllib.core.columns import Columns
from ray.rllib.core.rl_module.apis import ValueFunctionAPI
from ray.rllib.core.rl_module.rl_module import RLModule
from ray.rllib.core.rl_module.torch import TorchRLModule
from ray.rllib.utils.annotations import override

from rl_harness.learners.components import ACTIVATIONS, MLPHead
from rl_harness.learners.models.init import INIT_KEYS, ModuleInit, module_init, normal_init_
from rl_harness.learners.models.model_config import (
    check_known_keys,
    config_choice,
    config_sizes,
)
from rl_harness.learners.models.spaces import action_dist_input_dim


class ActorCriticRLModule(TorchRLModule, ValueFunctionAPI, abc.ABC):
    """A trunk computes one representation; policy and value heads read it.

    Subclasses build the trunk in `setup_trunk` and compute it in
    `representation`. `encode(batch)` is the public read of that representation
    (what probes and aux heads use); `_forward_train` also returns it under
    `Columns.EMBEDDINGS`, and `representation_dim` is its width.

    model_config keys shared by all subclasses:
      "head_hidden_sizes": hidden layers of the pi and vf heads (default []).
      "activation": one of tanh, relu, gelu, silu (default "tanh").
      "init": the trunk's initialisation, "torch_default" (default) or "normal"
        (every trunk weight N(0, "init_std"), default std 0.02, every trunk bias 0,
        LayerNorms (1, 0), a transformer's linear input projection without a bias: the
        original belief-geometry study's transformers);
      "init_std": the std of "normal" (refused with "torch_default");
      "pi_output_scale" (default 0.01), "vf_output_scale" (default 1.0): factors on the
        policy / value head's last-layer weights (their biases start at 0).
    Details: `rl_harness.learners.models.init`. The resolved initialisation is `self.init`
    (a `ModuleInit`) and, before any module is built, `resolved_init(model_config)`: the
    harness records it in config.json under `module.init`.

    Configs are strict: every class in the MRO (module, trunk, composed head
    mixins) lists the keys it reads in `MODEL_CONFIG_KEYS`; any other key fails
    `setup` with one line naming it and the accepted keys (RLlib's own
    "vf_share_layers", which PPO adds, is accepted and unused).

    Action spaces: Discrete (categorical logits) or a 1-D Box of any size
    (RLlib's TorchDiagGaussian: the pi head outputs means and log-stds).

    Analysis contracts (`rl_harness.analysis.module_api`, checked for every bundled module
    by tests/analysis/test_module_api.py): `EncoderAPI` (`encode`) and `PolicyHeadsAPI`
    (`forward_heads`); subclasses add what they state.
    """

    MODEL_CONFIG_KEYS: ClassVar[tuple[str, ...]] = ("head_hidden_sizes", "activation", *INIT_KEYS)
    representation_dim: int
    init: ModuleInit

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # These modules build their own layers; drop the algorithm's default catalog
        # (e.g. PPOCatalog), which would otherwise be built from RLlib's default model
        # config and choose the action distribution behind our backs.
        kwargs.pop("catalog_class", None)
        super().__init__(*args, **kwargs)

    def _config_dict(self) -> dict[str, Any]:
        """`model_config` as the dict these modules read (RLModuleSpec.build passes a dict; a
        DefaultModelConfig dataclass is RLlib's catalog's, which these modules drop)."""
        config = self.model_config or {}
        if not isinstance(config, dict):
            raise TypeError(
                f"{type(self).__name__} takes model_config as a dict, got {type(config).__name__}"
            )
        return config

    def _observation_space(self) -> gym.Space[Any]:
        """The observation space (RLlib builds every module with one)."""
        if self.observation_space is None:
            raise ValueError(f"{type(self).__name__} needs an observation_space")
        return self.observation_space

    def _action_space(self) -> gym.Space[Any]:
        """The action space (RLlib builds every module with one)."""
        if self.action_space is None:
            raise ValueError(f"{type(self).__name__} needs an action_space")
        return self.action_space

    def input_parameters(self) -> list[torch.nn.Parameter]:
        """The trunk's input-side parameters (embeddings: raw features in). Subclasses list
        them so Muon leaves them to AdamW."""
        return []

    def muon_parameters(self) -> list[torch.nn.Parameter]:
        """The hidden 2-D weight matrices (what Muon orthogonalizes): every 2-D parameter
        except the trunk's input side (`input_parameters`) and the heads (pi, vf and the
        head mixins' `*_head`). Embeddings, norms, biases and heads go to AdamW."""
        inputs = {id(p) for p in self.input_parameters()}
        return [
            p
            for name, p in self.named_parameters()
            if p.ndim == 2
            and id(p) not in inputs
            and not name.startswith(("pi.", "vf."))
            and "_head." not in name
        ]

    @classmethod
    def accepted_model_config_keys(cls) -> frozenset[str]:
        """Every model_config key this class (with its composed mixins) reads."""
        return frozenset(
            key for klass in cls.__mro__ for key in vars(klass).get("MODEL_CONFIG_KEYS", ())
        )

    @classmethod
    def resolved_init(cls, model_config: dict[str, Any] | None) -> dict[str, Any]:
        """The initialisation `model_config` gives this class, defaults filled in (what
        config.json records under `module.init`): {"init", "init_std", "pi_output_scale",
        "vf_output_scale"}. Raises ValueError, naming the key, for a bad value."""
        return module_init(model_config or {}).to_dict()

    @override(RLModule)
    def setup(self) -> None:
        config = self._config_dict()
        check_known_keys(config, self.accepted_model_config_keys(), type(self).__name__)
        self.init = module_init(config)
        self.representation_dim = self.setup_trunk(config)
        if self.init.init_std is not None:
            # Only the trunk exists yet: the heads below (and head mixins') keep their init.
            normal_init_(self, self.init.init_std)
        head_sizes = config_sizes(config, "head_hidden_sizes", (), allow_empty=True)
        activation = config_choice(config, "activation", "tanh", ACTIVATIONS)
        self.pi = MLPHead(
            self.representation_dim,
            action_dist_input_dim(self._action_space()),
            head_sizes,
            activation,
            output_scale=self.init.pi_output_scale,
        )
        self.vf = MLPHead(
            self.representation_dim,
            1,
            head_sizes,
            activation,
            output_scale=self.init.vf_output_scale,
        )
        self._mode_dependent = self._has_mode_dependent_layers()

    @abc.abstractmethod
    def setup_trunk(self, config: dict[str, Any]) -> int:
        """Build the trunk's layers from model_config; return the representation width.

        `self.init` is set when this runs (a transformer reads `self.init.input_bias`); the
        base applies a "normal" scheme to every layer this registers, after it returns."""

    @abc.abstractmethod
    def representation(
        self, batch: dict[str, Any]
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor] | None]:
        """(representation (..., representation_dim), STATE_OUT or None if stateless)."""

    def training_representation(
        self, batch: dict[str, Any]
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor] | None]:
        """What `_forward_train` and `compute_values` read: `representation(batch)` unless a
        subclass computes the same function another way for the learner's batches."""
        return self.representation(batch)

    def encode(self, batch: dict[str, Any]) -> torch.Tensor:
        """The representation a probe reads; see the subclass for its shape.

        Runs with gradients; wrap in torch.no_grad() for analysis.
        """
        return self.representation(batch)[0]

    def forward_heads(self, representation: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(action distribution inputs (..., A), values (...)): the policy and value heads
        reading `representation` (..., representation_dim), i.e. the module after `encode`.

        For analysis that edits the representation before the heads read it
        (rl_harness.analysis.interventions); for `representation = encode(batch)` these are
        the ACTION_DIST_INPUTS of `_forward` and `compute_values`'s values.
        """
        return self.pi(representation), self.vf(representation).squeeze(-1)

    def _has_mode_dependent_layers(self) -> bool:
        return any(
            (isinstance(m, torch.nn.Dropout) and m.p > 0)
            or isinstance(m, torch.nn.modules.batchnorm._BatchNorm)
            for m in self.modules()
        )

    @override(TorchRLModule)
    def forward_exploration(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        # RLlib toggles eval()/train() around every acting call, walking all submodules
        # twice per env step; skip that when no layer behaves differently in eval mode.
        if self._mode_dependent:
            return super().forward_exploration(batch, **kwargs)
        return self._forward_exploration(batch, **kwargs)

    @override(TorchRLModule)
    def forward_inference(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        if self._mode_dependent:
            return super().forward_inference(batch, **kwargs)
        return self._forward_inference(batch, **kwargs)

    @override(RLModule)
    def _forward(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        embeddings, state_out = self.representation(batch)
        out: dict[str, Any] = {Columns.ACTION_DIST_INPUTS: self.pi(embeddings)}
        if state_out is not None:
            out[Columns.STATE_OUT] = state_out
        return out

    @override(RLModule)
    def _forward_train(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        embeddings, state_out = self.training_representation(batch)
        out: dict[str, Any] = {
            Columns.ACTION_DIST_INPUTS: self.pi(embeddings),
            Columns.EMBEDDINGS: embeddings,
        }
        if state_out is not None:
            out[Columns.STATE_OUT] = state_out
        return out

    @override(ValueFunctionAPI)
    def compute_values(
        self, batch: dict[str, Any], embeddings: torch.Tensor | None = None
    ) -> torch.Tensor:
        if embeddings is None:
            embeddings, _ = self.training_representation(batch)
        values: torch.Tensor = self.vf(embeddings).squeeze(-1)
        return values
