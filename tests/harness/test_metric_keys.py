"""The metric keys the library names (harness/metric_keys.py) are RLlib's own result keys,
flattened with "/" as metrics.jsonl rows hold them; the root API exports the ones recipes
read."""

from __future__ import annotations

from ray.rllib import core
from ray.rllib.core.learner.learner import Learner
from ray.rllib.utils import metrics
from ray.tune import result

import rl_harness
from rl_harness.harness import metric_keys


def test_metric_keys_are_rllibs_result_keys():
    runners = metrics.ENV_RUNNER_RESULTS
    assert metric_keys.ITERATION_KEY == result.TRAINING_ITERATION
    assert metric_keys.ENV_STEPS_KEY == metrics.NUM_ENV_STEPS_SAMPLED_LIFETIME
    assert metric_keys.ITERATION_TIME_KEY == result.TIME_THIS_ITER_S
    assert metric_keys.TOTAL_TIME_KEY == result.TIME_TOTAL_S
    assert metric_keys.ENV_RUNNERS == runners
    assert metric_keys.LEARNERS == metrics.LEARNER_RESULTS
    assert metric_keys.ALL_MODULES == core.ALL_MODULES
    assert metric_keys.DEFAULT_MODULE_ID == core.DEFAULT_MODULE_ID
    assert metric_keys.TOTAL_LOSS == Learner.TOTAL_LOSS_KEY
    assert metric_keys.ENV_RUNNER_STATS == (
        metrics.EPISODE_RETURN_MEAN,
        metrics.EPISODE_RETURN_MIN,
        metrics.EPISODE_RETURN_MAX,
        metrics.EPISODE_LEN_MEAN,
        metrics.NUM_EPISODES,
        metrics.NUM_ENV_STEPS_SAMPLED,
    )
    assert metric_keys.ITERATION_ENV_STEPS_KEY == f"{runners}/{metrics.NUM_ENV_STEPS_SAMPLED}"
    assert metric_keys.RETURN_KEY == f"{runners}/{metrics.EPISODE_RETURN_MEAN}"
    assert metric_keys.LENGTH_KEY == f"{runners}/{metrics.EPISODE_LEN_MEAN}"
    learner = f"{metrics.LEARNER_RESULTS}/{core.DEFAULT_MODULE_ID}/{Learner.TOTAL_LOSS_KEY}"
    assert metric_keys.learner_key(Learner.TOTAL_LOSS_KEY) == learner
    assert metric_keys.learner_key("aux/accuracy", "p1") == "learners/p1/aux/accuracy"


def test_recipes_read_them_from_the_root_api():
    assert rl_harness.RETURN_KEY == metric_keys.RETURN_KEY
    assert rl_harness.learner_key is metric_keys.learner_key
