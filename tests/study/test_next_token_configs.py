"""Fast checks of the MESS3 next-token recipes (mess3_next_token): they build their configs,
each the study's spec but for what it states."""

from __future__ import annotations

import importlib

import numpy as np
import pytest
from experiments.mess3_next_token import shared, spec
from ray.rllib.algorithms.ppo.torch.ppo_torch_learner import PPOTorchLearner
from ray.rllib.core.rl_module.rl_module import RLModuleSpec

from rl_harness.envs.hmm import ENV_ID, HMMVectorEnv, sampled_beliefs
from rl_harness.learners.models import GRUActorCritic, NextTokenAuxHeadMixin
from rl_harness.losses import InfoTargetsToBatch, NextTokenAuxLossMixin
from tests.study.spec_check import changed_keys

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


# What each leaf states beyond the spec (spec.py): the config.to_dict() keys it changes.
STATED = {
    "reward_only": set(),
    "next_token_aux": {
        "_rl_module_spec",
        "_learner_class",
        "learner_config_dict",
        "_learner_connector",
    },
}


@pytest.mark.parametrize("name", ["smoke", "full"])
@pytest.mark.parametrize("leaf", sorted(LEAVES))
def test_each_leaf_is_the_spec_but_for_what_it_states(leaf, name):
    module = recipe(leaf)
    assert module.BUDGETS is spec.BUDGETS and module.DEFAULT_BUDGET == spec.DEFAULT_BUDGET
    plan = spec.BUDGETS[name]
    base = spec.ppo_config(
        plan, RLModuleSpec(module_class=GRUActorCritic, model_config=dict(spec.MODEL_CONFIG))
    )
    own = module.build_config(plan)
    changed = changed_keys(base, own)
    assert changed == STATED[leaf]
    if leaf == "next_token_aux":
        model_config = own.rl_module_spec.model_config
        assert model_config == spec.MODEL_CONFIG | {"next_token_aux/num_classes": 3}


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
