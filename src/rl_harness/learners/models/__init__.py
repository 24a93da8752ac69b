"""TorchRLModules for the RLlib new API stack (PPO-ready: ValueFunctionAPI)."""

from rl_harness.learners.models.aux_heads import (
    NextTokenAuxHeadMixin,
    StateAuxHeadMixin,
    build_aux_head,
)
from rl_harness.learners.models.base import ActorCriticRLModule
from rl_harness.learners.models.gru import GRUActorCritic
from rl_harness.learners.models.kv_cache import (
    KVCacheLearnerMixin,
    KVCachePPOLearner,
    store_kv_steps,
)
from rl_harness.learners.models.mlp import MLPActorCritic
from rl_harness.learners.models.prev_action import (
    PREV_ACTIONS,
    PrevActionToBatch,
    prev_action_env_to_module,
    prev_action_learner,
)
from rl_harness.learners.models.stateful_transformer import StatefulTransformerActorCritic
from rl_harness.learners.models.transformer import TransformerActorCritic

__all__ = [
    "PREV_ACTIONS",
    "ActorCriticRLModule",
    "GRUActorCritic",
    "KVCacheLearnerMixin",
    "KVCachePPOLearner",
    "MLPActorCritic",
    "NextTokenAuxHeadMixin",
    "PrevActionToBatch",
    "StateAuxHeadMixin",
    "StatefulTransformerActorCritic",
    "TransformerActorCritic",
    "build_aux_head",
    "prev_action_env_to_module",
    "prev_action_learner",
    "store_kv_steps",
]
