"""Fast checks of the MESS3 next-token recipes (mess3_next_token): they build their configs."""

from __future__ import annotations

import importlib
from dataclasses import asdict

import numpy as np
import pytest
from experiments.mess3_next_token import shared
from ray.rllib.algorithms.ppo.torch.ppo_torch_learner import PPOTorchLearner

from rl_harness.envs.hmm import ENV_ID, HMMVectorEnv, sampled_beliefs
from rl_harness.learners.models import GRUActorCritic, NextTokenAuxHeadMixin
from rl_harness.losses import InfoTargetsToBatch, NextTokenAuxLossMixin

LEAVES = {
    "reward_only": "experiments.mess3_next_token.reward_only.experiment",
    "next_token_aux": "experiments.mess3_next_token.next_token_aux.experiment",
}


def recipe(leaf: str):
    return importlib.import_module(LEAVES[leaf])


@pytest.mark.parametrize("smoke", [True, False])
@pytest.mark.parametrize("leaf", sorted(LEAVES))
def test_recipe_builds_its_config(leaf, smoke):
    module = recipe(leaf)
    assert callable(module.run)
    plan = module.BUDGETS["smoke" if smoke else module.DEFAULT_BUDGET]
    assert plan == (module.SMOKE if smoke else module.FULL)
    config = module.build_config(plan)
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
    # The learner connector, built the way RLlib builds it for the learner.
    env = HMMVectorEnv(1, config.env_config)
    pipeline = config.build_learner_connector(env.single_observation_space, env.single_action_space)
    env.close()
    ours = [c for c in pipeline.connectors if isinstance(c, InfoTargetsToBatch)]
    if aux:
        assert config.learner_config_dict == {"next_token_aux/weight": module.AUX_WEIGHT}
        assert spec.model_config["next_token_aux/num_classes"] == 3
        assert len(ours) == 1 and ours[0].targets == {"next_token_aux": ("token", 1)}
    else:
        assert config.learner_config_dict == {} and ours == []
    # A fresh config every call: a caller's edits never leak into the next run.
    assert module.build_config(plan) is not config


def _science(config) -> dict:
    """The settings both leaves must share (everything but the auxiliary loss)."""
    model_config = {
        k: v for k, v in config.rl_module_spec.model_config.items() if "next_token_aux" not in k
    }
    keys = ("env", "env_config", "num_envs_per_env_runner", "gym_env_vectorize_mode")
    keys += ("rollout_fragment_length", "train_batch_size_per_learner", "minibatch_size")
    keys += ("num_epochs", "lr", "gamma", "lambda_")
    return {key: getattr(config, key) for key in keys} | {"model_config": model_config}


@pytest.mark.parametrize("smoke", [True, False])
def test_leaves_differ_only_in_the_auxiliary_loss(smoke):
    # Each leaf writes its own config chain and budget; this keeps the copies in step.
    reward_only, aux = recipe("reward_only"), recipe("next_token_aux")
    name = "smoke" if smoke else "full"
    assert _science(reward_only.build_config(reward_only.BUDGETS[name])) == _science(
        aux.build_config(aux.BUDGETS[name])
    )
    assert asdict(reward_only.SMOKE) == asdict(aux.SMOKE)
    assert asdict(reward_only.FULL) == asdict(aux.FULL)


@pytest.mark.parametrize("leaf", sorted(LEAVES))
def test_smoke_budget_is_smaller_than_full(leaf):
    module = recipe(leaf)
    for field in ("iterations", "train_batch", "probe_episodes", "n_bootstrap"):
        assert getattr(module.SMOKE, field) < getattr(module.FULL, field)
    assert module.FULL.iterations * module.FULL.train_batch == 245_760


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
