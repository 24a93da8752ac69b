"""Checkpoints recorded before the connector pieces moved to `learners.connectors` still load.

RLlib (cloudpickle) stores a config's learner class and connector factories by module path
and name, as each run's config.json shows (e.g. the flagship's
"rl_harness.learners.models.kv_cache.KVCachePPOLearner"); restoring such a checkpoint
(`load_algorithm`, `--resume-from`) imports that path. Each old path must give the very
object `learners.connectors` defines, and new pickles name the new home.
"""

from __future__ import annotations

import functools
import pickle

import pytest
import ray.cloudpickle

import rl_harness.learners.connectors as connectors

OLD_PATHS = [
    ("rl_harness.learners.models.kv_cache", "KVCachePPOLearner"),
    ("rl_harness.learners.models.kv_cache", "KVCacheLearnerMixin"),
    ("rl_harness.learners.models.kv_cache", "kv_cache_env_to_module"),
    ("rl_harness.learners.models.kv_cache", "kv_steps_module_to_env"),
    ("rl_harness.learners.models.kv_cache", "KVCacheStateIn"),
    ("rl_harness.learners.models.kv_cache", "KVStepsToEpisodes"),
    ("rl_harness.learners.models.kv_cache", "BatchedNormalizeAndClipActions"),
    ("rl_harness.learners.models.kv_cache", "KVCacheChunkStarts"),
    ("rl_harness.learners.models.prev_action", "PrevActionToBatch"),
    ("rl_harness.learners.models.prev_action", "prev_action_env_to_module"),
    ("rl_harness.learners.models.prev_action", "prev_action_learner"),
    ("rl_harness.losses.info_targets", "InfoTargetsToBatch"),
]


@pytest.mark.parametrize(("module", "name"), OLD_PATHS)
def test_a_pickle_naming_the_old_path_loads_the_connectors_object(module, name):
    recorded = f"c{module}\n{name}\n.".encode()  # pickle's GLOBAL: a class or function by path
    assert pickle.loads(recorded) is getattr(connectors, name)


def test_new_pickles_name_learners_connectors():
    factory = functools.partial(
        connectors.InfoTargetsToBatch, targets={"aux": {"info_key": "token"}}
    )
    for obj in (connectors.KVCachePPOLearner, connectors.kv_cache_env_to_module, factory):
        data = ray.cloudpickle.dumps(obj)
        assert b"rl_harness.learners.connectors." in data
        assert b"rl_harness.learners.models" not in data and b"rl_harness.losses" not in data
