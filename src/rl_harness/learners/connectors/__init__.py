"""RLlib ConnectorV2 pieces: what a module or loss reads that is not in RLlib's default batch.

`rl_harness.learners.models` re-exports the previous-action and K/V-cache names, and
`rl_harness.losses` re-exports `InfoTargetsToBatch`, where recipes import them.
"""

from rl_harness.learners.connectors.batched_acting import (
    BatchedObservations,
    ListifyBatch,
    UntimedPipeline,
    batched_acting,
    batched_env_to_module,
    batched_module_to_env,
)
from rl_harness.learners.connectors.info_targets import InfoTargetsToBatch
from rl_harness.learners.connectors.kv_cache import (
    BatchedNormalizeAndClipActions,
    KVCacheChunkStarts,
    KVCacheLearnerMixin,
    KVCachePPOLearner,
    KVCacheStateIn,
    KVStepsToEpisodes,
    chunk_start_caches,
    kv_cache_env_to_module,
    kv_steps_module_to_env,
    store_kv_steps,
)
from rl_harness.learners.connectors.prev_action import (
    PREV_ACTIONS,
    PrevActionToBatch,
    prev_action_env_to_module,
    prev_action_learner,
)

__all__ = [
    "PREV_ACTIONS",
    "BatchedNormalizeAndClipActions",
    "BatchedObservations",
    "InfoTargetsToBatch",
    "KVCacheChunkStarts",
    "KVCacheLearnerMixin",
    "KVCachePPOLearner",
    "KVCacheStateIn",
    "KVStepsToEpisodes",
    "ListifyBatch",
    "PrevActionToBatch",
    "UntimedPipeline",
    "batched_acting",
    "batched_env_to_module",
    "batched_module_to_env",
    "chunk_start_caches",
    "kv_cache_env_to_module",
    "kv_steps_module_to_env",
    "prev_action_env_to_module",
    "prev_action_learner",
    "store_kv_steps",
]
