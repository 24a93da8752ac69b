"""TorchRLModules for the RLlib new API stack (PPO-ready: ValueFunctionAPI).

Also exported here, where recipes import them: the connector pieces the stateful
transformer needs (previous action, per-step K/V storage) and the batched acting pipelines
of a stateless module (`batched_acting`), from `learners.connectors`.
"""

from rl_harness.learners.connectors.batched_acting import batched_acting
from rl_harness.learners.connectors.kv_cache import (
    KVCacheLearnerMixin,
    KVCachePPOLearner,
    store_kv_steps,
)
from rl_harness.learners.connectors.prev_action import (
    PREV_ACTIONS,
    PrevActionToBatch,
    prev_action_env_to_module,
    prev_action_learner,
)
from rl_harness.learners.models.aux_heads import (
    NextTokenAuxHeadMixin,
    StateAuxHeadMixin,
    build_aux_head,
)
from rl_harness.learners.models.base import ActorCriticRLModule
from rl_harness.learners.models.gru import GRUActorCritic
from rl_harness.learners.models.mlp import MLPActorCritic
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
    "batched_acting",
    "build_aux_head",
    "prev_action_env_to_module",
    "prev_action_learner",
    "store_kv_steps",
]
