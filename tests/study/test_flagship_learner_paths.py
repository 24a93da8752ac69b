"""The flagship's learner with its GAE value pass without autograd
(`NoGradGeneralAdvantageEstimation`, what `KVCacheLearnerMixin` installs) trains as the
path before it (RLlib's GAE piece, autograd on): on one fixed batch of the study's own
config (its module at full size, PPO settings, per-step K/V storage), the same advantages,
value targets, losses and weights after an update, to float tolerance."""

from __future__ import annotations

import copy

import numpy as np
import torch
from experiments.mess3_belief_geometry.reward_only import experiment as flagship
from ray.rllib.core.columns import Columns
from ray.rllib.env.single_agent_env_runner import SingleAgentEnvRunner
from ray.rllib.evaluation.postprocessing import Postprocessing

from rl_harness.learners.connectors.kv_cache import (
    KVCachePPOLearner,
    NoGradGeneralAdvantageEstimation,
)


class OldGAELearner(KVCachePPOLearner):
    gae_without_autograd = False


def _config():
    config = flagship.build_config(flagship.SMOKE)
    config.environment(env_config={**config.env_config, "episode_length": 48})
    config.env_runners(num_envs_per_env_runner=2, num_env_runners=0)
    config.training(train_batch_size_per_learner=160, minibatch_size=80, num_epochs=2)
    config.debugging(seed=3)
    return config


def _learner(config, learner_class, spaces):
    config = config.copy(copy_frozen=False)
    config.learners(learner_class=learner_class)
    return config.build_learner(spaces=spaces)


def _update(learner, episodes):
    np.random.seed(0)
    torch.manual_seed(0)
    batch = learner._learner_connector(
        rl_module=learner.module, batch={}, episodes=copy.deepcopy(episodes), shared_data={}
    )["default_policy"]
    np.random.seed(0)
    torch.manual_seed(0)
    results = learner.update(
        episodes=copy.deepcopy(episodes),
        timesteps={"num_env_steps_sampled_lifetime": 160},
        num_epochs=2,
        minibatch_size=80,
        shuffle_batch_per_epoch=True,
    )
    weights = _flat(learner)
    return batch, results, weights


def _flat(learner):
    parameters = learner.module["default_policy"].parameters()
    return torch.cat([p.detach().reshape(-1) for p in parameters])


def _loss(results, name):
    value = results["default_policy"][name]
    return float(value.peek() if hasattr(value, "peek") else value)


def test_gae_without_autograd_trains_as_rllibs_piece():
    config = _config()
    runner = SingleAgentEnvRunner(config=config)
    try:
        episodes = runner.sample(num_timesteps=96, random_actions=False)
        episodes += runner.sample(num_timesteps=64, random_actions=False)  # cut chunks
    finally:
        runner.stop()
    assert any(e.t_started > 0 for e in episodes)
    spaces = runner.get_spaces()
    new = _learner(config, KVCachePPOLearner, spaces)
    old = _learner(config, OldGAELearner, spaces)
    old.module.set_state(new.module.get_state())
    names = [type(p).__name__ for p in new._learner_connector.connectors]
    old_names = [type(p).__name__ for p in old._learner_connector.connectors]
    assert "NoGradGeneralAdvantageEstimation" in names and "GeneralAdvantageEstimation" not in names
    assert "GeneralAdvantageEstimation" in old_names
    assert isinstance(new._learner_connector.connectors[-1], NoGradGeneralAdvantageEstimation)
    start = _flat(new).clone()

    new_batch, new_results, new_weights = _update(new, episodes)
    old_batch, old_results, old_weights = _update(old, episodes)

    for key in (Postprocessing.ADVANTAGES, Postprocessing.VALUE_TARGETS):
        a, b = new_batch[key], old_batch[key]
        assert not a.requires_grad and float(a.abs().max()) > 0
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    assert Columns.STATE_IN in new_batch
    for name in ("policy_loss", "vf_loss", "total_loss", "entropy"):
        assert np.isclose(_loss(new_results, name), _loss(old_results, name), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(new_weights, old_weights, rtol=1e-5, atol=1e-6)
    assert float((new_weights - start).abs().max()) > 1e-5  # the update moved the weights
