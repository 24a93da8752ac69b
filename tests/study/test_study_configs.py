"""Fast checks of the MESS3 belief-geometry recipes: they import and build their configs."""

from __future__ import annotations

import importlib

import numpy as np
import pytest
from experiments.mess3_belief_geometry import shared
from ray.rllib.algorithms.ppo.torch.ppo_torch_learner import PPOTorchLearner

from rl_harness.envs.hmm import ENV_ID, sampled_beliefs
from rl_harness.learners.models import GRUActorCritic, NextTokenAuxHeadMixin
from rl_harness.losses import InfoTargetsToBatch, NextTokenAuxLossMixin

LEAVES = {
    "reward_only": "experiments.mess3_belief_geometry.reward_only.experiment",
    "next_token_aux": "experiments.mess3_belief_geometry.next_token_aux.experiment",
}


@pytest.mark.parametrize("smoke", [True, False])
@pytest.mark.parametrize("leaf", sorted(LEAVES))
def test_recipe_builds_its_config(leaf, smoke):
    recipe = importlib.import_module(LEAVES[leaf])
    assert callable(recipe.run)
    config = recipe.build_config(smoke)
    plan = shared.budget(smoke)
    assert config.env == ENV_ID
    assert config.env_config["model_kwargs"] == {"x": 0.05, "alpha": 0.85}
    assert config.env_config["task"] == "rl_harness.envs.mess3.tasks:NextTokenTask"
    assert config.env_config["token_window"] == 1 and "token" in config.env_config["info"]
    assert config.train_batch_size_per_learner == plan.train_batch
    assert config.gamma == 0.0
    # Whole episodes per fragment: batch = num_envs * episode length.
    assert config.rollout_fragment_length * config.num_envs_per_env_runner == plan.train_batch
    assert config.rollout_fragment_length % shared.EPISODE_LENGTH == 0
    spec = config.rl_module_spec
    assert issubclass(spec.module_class, GRUActorCritic)
    aux = leaf == "next_token_aux"
    assert issubclass(spec.module_class, NextTokenAuxHeadMixin) is aux
    learner = config.learner_class
    assert issubclass(learner, PPOTorchLearner)
    assert issubclass(learner, NextTokenAuxLossMixin) is aux
    if aux:
        assert config.learner_config_dict == {"next_token_aux/weight": shared.AUX_WEIGHT}
        assert spec.model_config["next_token_aux/num_classes"] == 3
        connector = config._learner_connector
        assert connector.func is InfoTargetsToBatch
        assert connector.keywords["targets"] == shared.AUX_TARGETS
    # A fresh config every call: a caller's edits never leak into the next run.
    assert recipe.build_config(smoke) is not config


def test_smoke_budget_is_smaller_than_full():
    for field in ("iterations", "train_batch", "probe_episodes", "n_bootstrap"):
        assert getattr(shared.SMOKE, field) < getattr(shared.FULL, field)


def test_memoryless_reference_matches_simulation():
    hmm = shared.model()
    tokens, _ = sampled_beliefs(hmm, 400, shared.EPISODE_LENGTH, np.random.default_rng(0))
    # Best guess from the newest token alone, estimated by counting (first step: 1/3).
    counts = np.zeros((3, 3))
    np.add.at(counts, (tokens[:, :-1].ravel(), tokens[:, 1:].ravel()), 1)
    rate = counts.max(axis=1).sum() / counts.sum()
    steps = shared.EPISODE_LENGTH
    estimate = (1 / 3 + (steps - 1) * rate) / steps
    assert shared.memoryless_reward(hmm, steps) == pytest.approx(estimate, abs=0.005)
    # Between guessing and the Bayes-optimal predictor, which also uses older tokens.
    from rl_harness.envs.mess3 import bayes_optimal_next_token_reward

    bayes = bayes_optimal_next_token_reward(hmm, episode_length=steps)
    assert 1 / 3 < shared.memoryless_reward(hmm, steps) < bayes


def test_expected_rewards_bound_the_agent_by_the_bayes_optimum():
    hmm = shared.model()
    _, beliefs = sampled_beliefs(hmm, 8, 10, np.random.default_rng(1))
    beliefs = beliefs[:, :10]
    greedy = np.argmax(beliefs @ hmm.token_matrices.sum(axis=2).T, axis=-1)
    best = shared.expected_rewards(hmm, beliefs, greedy)
    assert best["agent"] == pytest.approx(best["bayes_optimal"])
    worse = shared.expected_rewards(hmm, beliefs, (greedy + 1) % 3)
    assert worse["agent"] < worse["bayes_optimal"] == best["bayes_optimal"]
    # Certain of state 0, the next token is 0 w.p. y * alpha + 2x * (1 - alpha) / 2.
    certain = shared.expected_rewards(hmm, np.array([[[1.0, 0.0, 0.0]]]), np.array([[0]]))
    assert certain["agent"] == pytest.approx(0.9 * 0.85 + 0.1 * 0.075)
