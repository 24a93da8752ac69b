"""TorchRLModules for the RLlib new API stack (PPO-ready: ValueFunctionAPI)."""

from rl_harness.learners.models.aux_heads import (
    NextTokenAuxHeadMixin,
    StateAuxHeadMixin,
    build_aux_head,
)
from rl_harness.learners.models.base import ActorCriticRLModule
from rl_harness.learners.models.gru import GRUActorCritic
from rl_harness.learners.models.mlp import MLPActorCritic
from rl_harness.learners.models.transformer import TransformerActorCritic

__all__ = [
    "ActorCriticRLModule",
    "GRUActorCritic",
    "MLPActorCritic",
    "NextTokenAuxHeadMixin",
    "StateAuxHeadMixin",
    "TransformerActorCritic",
    "build_aux_head",
]
