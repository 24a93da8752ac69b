"""The K/V-cache pieces' former path; they live in `rl_harness.learners.connectors.kv_cache`.

Kept because checkpoints name it: RLlib pickles a config's learner class and connector
factories by module path, and runs recorded before the move (config.json:
"rl_harness.learners.models.kv_cache.KVCachePPOLearner") restore through it. Import from
`learners.connectors` (or `learners.models` for `store_kv_steps` and the learner classes).
"""

from rl_harness.learners.connectors.kv_cache import (
    BatchedNormalizeAndClipActions,
    KVCacheChunkStarts,
    KVCacheLearnerMixin,
    KVCachePPOLearner,
    KVCacheStateIn,
    KVStepsToEpisodes,
    kv_cache_env_to_module,
    kv_steps_module_to_env,
    store_kv_steps,
)

__all__ = [
    "BatchedNormalizeAndClipActions",
    "KVCacheChunkStarts",
    "KVCacheLearnerMixin",
    "KVCachePPOLearner",
    "KVCacheStateIn",
    "KVStepsToEpisodes",
    "kv_cache_env_to_module",
    "kv_steps_module_to_env",
    "store_kv_steps",
]
