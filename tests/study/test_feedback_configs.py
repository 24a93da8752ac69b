"""The mess3_feedback study's recipe and analysis pieces, without Ray (seconds)."""

from __future__ import annotations

import dataclasses
import importlib

import numpy as np
import pytest
import torch
from ray.rllib.core.rl_module.rl_module import RLModuleSpec

from rl_harness.envs.hmm import HMMVectorEnv

STUDY = "experiments.mess3_feedback"
LEAF = f"{STUDY}.ppo.experiment"


@pytest.fixture(scope="module")
def recipe():
    return importlib.import_module(LEAF)


@pytest.fixture(scope="module")
def shared():
    return importlib.import_module(f"{STUDY}.shared")


def test_the_recipe_sets_the_feedback_studys_process_and_model(recipe, shared):
    assert set(recipe.BUDGETS) == {"smoke", "cpu", "full"} and recipe.DEFAULT_BUDGET == "cpu"
    config = recipe.build_config(recipe.SMOKE)
    env = config.env_config
    assert env["task_kwargs"] == {"emission": "on_leave", "feedback": 0.1}
    assert env["model_kwargs"] == {"x": 0.05, "alpha": 0.85}
    assert env["token_window"] == env["action_window"] == 10 and env["dict_observation"]
    assert config.gamma == 0.0 and config.lambda_ == 0.0
    assert recipe.build_config(recipe.SMOKE) is not config  # fresh each call
    vector = HMMVectorEnv(1, env)
    module = RLModuleSpec(
        module_class=config.rl_module_spec.module_class,
        observation_space=vector.single_observation_space,
        action_space=vector.single_action_space,
        model_config=recipe.MODEL_CONFIG,
    ).build()
    # Each of the 10 positions is a (token, previous action) pair, read by name.
    assert module.layout.keys == ("tokens", "actions") and module.layout.feature_dim == 6
    enc = module.transformer
    assert (enc.d_head, enc.num_heads, enc.num_layers, enc.context_len) == (8, 1, 4, 10)


def test_the_ceiling_is_the_known_bayes_accuracy(shared):
    ceiling = shared.ceilings(32, shared.EPISODE_LENGTH, seed=0)
    assert (
        abs(ceiling["bayes_optimal_accuracy"] - 0.6996)
        < 4 * ceiling["bayes_optimal_accuracy_se"] + 1e-3
    )


def test_the_analysis_runs_on_an_untrained_agent(recipe, shared):
    vector = HMMVectorEnv(1, recipe.build_config(recipe.SMOKE).env_config)
    torch.manual_seed(0)
    module = RLModuleSpec(
        module_class=recipe.TransformerActorCritic,
        observation_space=vector.single_observation_space,
        action_space=vector.single_action_space,
        model_config=recipe.MODEL_CONFIG | {"d_model": 16, "num_layers": 1, "ff_dim": 32},
    ).build()
    plan = dataclasses.replace(recipe.SMOKE, probe_episodes=8, probe_steps=16, n_bootstrap=10)
    record = shared.analyze_module(module, plan, seed=0)
    scores = record["scores"]
    assert 0.0 <= scores["exact_accuracy"] <= scores["bayes_optimal_same_steps"] <= 1.0
    assert abs(scores["bayes_optimal_same_steps"] - 0.70) < 0.05
    assert set(record["agreement_with_bayes_guesser"]) == {"greedy", "sampled"}
    cf = record["counterfactual_previous_action"]
    assert cf["n_steps"] == 8 * 15 and cf["exact_norm"] > 0
    for mode in ("mask", "shuffle"):
        ablation = record["ablations"][mode]
        assert "r2_pooled" in ablation["probe_replayed"]
        assert 0.0 <= ablation["closed_loop_scores"]["accuracy"] <= 1.0
    assert np.isfinite(record["probe"]["r2_pooled"]["value"])
    # The yardstick: the exact filter of the whole visible window beats the last pair alone.
    filters = record["window_filters"]
    assert filters["m10"]["r2_pooled"]["value"] > filters["m1"]["r2_pooled"]["value"]
    assert record["probe"]["permutation"] is not None
