"""The metric keys the library names (harness/metric_keys.py) are RLlib's own result keys,
flattened with "/" as metrics.jsonl rows hold them."""

from __future__ import annotations

from ray.rllib.utils import metrics
from ray.tune import result

from rl_harness.harness import metric_keys


def test_metric_keys_are_rllibs_result_keys():
    runners = metrics.ENV_RUNNER_RESULTS
    assert metric_keys.ITERATION_KEY == result.TRAINING_ITERATION
    assert metric_keys.ENV_STEPS_KEY == metrics.NUM_ENV_STEPS_SAMPLED_LIFETIME
    assert metric_keys.ITERATION_ENV_STEPS_KEY == f"{runners}/{metrics.NUM_ENV_STEPS_SAMPLED}"
    assert metric_keys.RETURN_KEY == f"{runners}/{metrics.EPISODE_RETURN_MEAN}"
    assert metric_keys.LENGTH_KEY == f"{runners}/{metrics.EPISODE_LEN_MEAN}"
