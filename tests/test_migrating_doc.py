"""docs/migrating.md's worked example stays runnable: its recipe builds a fresh PPOConfig
whose env, connectors and module act through RLlib's own env runner (no training: that is
the CLI's job)."""

from __future__ import annotations

import dataclasses
import re
import types

import numpy as np
import pytest
import torch
from ray.rllib.algorithms.ppo import PPOConfig
from ray.rllib.core.columns import Columns
from ray.rllib.env.single_agent_env_runner import SingleAgentEnvRunner

from rl_harness.analysis import collect_rollouts, info_target
from rl_harness.envs.hmm import ENV_ID, HMMEnv, HMMVectorEnv
from rl_harness.envs.hmm.action_tasks import OneStepLookaheadPolicy
from rl_harness.envs.mess3.solvers import OccupancyProblem
from rl_harness.harness.preflight import check_buildable
from rl_harness.learners.connectors.kv_cache import kv_cache_env_to_module
from rl_harness.learners.models import (
    PREV_ACTIONS,
    KVCacheLearnerMixin,
    StatefulTransformerActorCritic,
    prev_action_learner,
)
from tests.test_architecture import REPO

DOC = REPO / "docs" / "migrating.md"


def worked_example(title: str = "the occupancy-control recipe") -> types.ModuleType:
    text = DOC.read_text(encoding="utf-8").split(f"## Worked example: {title}", 1)[1]
    text = text.split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert len(blocks) == 1, "the worked example should be one python block"
    module = types.ModuleType("migrated_experiment")
    exec(compile(blocks[0], str(DOC), "exec"), module.__dict__)
    return module


def test_the_worked_example_builds_and_acts():
    recipe = worked_example()
    assert callable(recipe.run)
    config = recipe.build_config(True)
    assert isinstance(config, PPOConfig) and config.env == ENV_ID
    assert recipe.build_config(True) is not config
    assert config.train_batch_size_per_learner == 2048
    # The original reward_only recipe set no KL option: RLlib's default term stays on.
    assert config.use_kl_loss is True and config.kl_coeff == 0.2
    assert recipe.build_config(False).train_batch_size_per_learner == 32_768
    # store_kv_steps installed (the harness refuses the module without it), with the
    # env runner's previous-action piece.
    assert issubclass(config.learner_class, KVCacheLearnerMixin)
    assert config._env_to_module_connector.func is kv_cache_env_to_module
    assert config._env_to_module_connector.keywords == {"prev_action": True}
    assert config._learner_connector is prev_action_learner
    check_buildable(config)  # the harness's preflight: the module accepts the config
    # The solvers' problem at the doc's parameters is this env (for the ceilings it names).
    problem_config = OccupancyProblem(0.85, 5.0, 4.0).env_config(1)
    for key, value in problem_config.items():
        if key != "task_kwargs":
            assert config.env_config[key] == value, key
    assert config.env_config["task_kwargs"].items() <= problem_config["task_kwargs"].items()

    env = HMMVectorEnv(2, config.env_config)
    obs, _ = env.reset(seed=0)
    assert env.single_observation_space.shape == (3,)  # one one-hot token per step
    assert env.single_action_space.shape == (2,)
    spec = dataclasses.replace(
        config.rl_module_spec,
        observation_space=env.single_observation_space,
        action_space=env.single_action_space,
    )
    module = spec.build()
    assert isinstance(module, StatefulTransformerActorCritic)
    state = {k: torch.as_tensor(np.stack([v] * 2)) for k, v in module.get_initial_state().items()}
    assert state["k"].shape == (2, 3, 63, 96)  # (batch, num_layers, context - 1, d_model)
    # One acting step: (batch, time=1, ...) as RLlib's connectors hand it over.
    batch = {Columns.OBS: torch.as_tensor(obs)[:, None], PREV_ACTIONS: torch.zeros(2, 1, 2)}
    out = module.forward_inference({**batch, Columns.STATE_IN: state})
    assert out[Columns.ACTION_DIST_INPUTS].shape == (2, 1, 4)  # mean, log-std of a 2-d Gaussian
    assert out[Columns.STATE_OUT]["n"].tolist() == [[1], [1]]
    _, reward, _, _, _ = env.step(np.zeros((2, 2), dtype=np.float32))
    assert reward.shape == (2,) and np.isfinite(reward).all()
    env.close()


def test_the_worked_example_samples_through_rllibs_env_runner():
    # The env runner applies the doc's env-to-module connector: without the previous-action
    # column the module would refuse to act.
    config = (
        worked_example()
        .build_config(True)
        .env_runners(num_env_runners=0, num_envs_per_env_runner=1)
        .debugging(seed=0)
    )
    runner = SingleAgentEnvRunner(config=config)
    try:
        assert isinstance(runner.env.unwrapped.envs[0].unwrapped, HMMEnv)
        episodes = runner.sample(num_timesteps=40, random_actions=False)
        steps = sum(len(episode) for episode in episodes)
        assert steps == 40
        rewards = np.concatenate([episode.get_rewards() for episode in episodes])
        assert np.isfinite(rewards).all()
    finally:
        runner.stop()


# The original action-symmetry task (experiment repo, cycle 1 task.py), restated from its
# definition: per variant, the sign of the log-odds shift of entering state 2 from source
# states 0, 1, 2 for the positive and the negative action; other odds kept; reward 1 when
# the state a move LEAVES is 2; the control model started uniform.
ORIGINAL_DIRECTIONS = {
    1: ((1, 1, 1), (-1, -1, -1)),
    2: ((1, 1, -1), (-1, -1, -1)),
    3: ((1, -1, -1), (-1, 1, -1)),
}


def original_transition(base: np.ndarray, directions: tuple[int, ...]) -> np.ndarray:
    logits = np.log(base)
    logits[:, 2] += 1.5 * np.asarray(directions, dtype=np.float64)
    weights = np.exp(logits - logits.max(axis=1, keepdims=True))
    return weights / weights.sum(axis=1, keepdims=True)


@pytest.mark.parametrize("variant", [1, 2, 3])
def test_the_action_symmetry_example_is_the_original_study(variant):
    recipe = worked_example("the action-symmetry family")
    config = recipe.build_config(variant, False)
    # PPO as the original: RLlib's default KL term on, its lr, batch and minibatch.
    assert config.use_kl_loss is True and config.kl_coeff == 0.2
    assert (config.lr, config.gamma, config.lambda_, config.entropy_coeff) == (
        4.2e-4,
        0.99,
        0.95,
        0.003,
    )
    assert (config.train_batch_size_per_learner, config.minibatch_size) == (32_768, 2048)
    assert config.num_epochs == 6
    assert issubclass(config.learner_class, KVCacheLearnerMixin)  # store_kv_steps installed
    env = HMMVectorEnv(64, config.env_config | {"info": ["state_before", "state"]})
    # The uniform start, not the chain's stationary law.
    np.testing.assert_allclose(env.model.initial, [1 / 3, 1 / 3, 1 / 3])
    # Token one-hot then previous-action one-hot: the original's 6-float observation.
    assert env.single_observation_space.shape == (6,)
    base = env.model.transition_matrix
    positive, negative = ORIGINAL_DIRECTIONS[variant]
    for action, expected in enumerate(
        (base, *(original_transition(base, d) for d in (positive, negative)))
    ):
        np.testing.assert_allclose(env.task.transitions[action], expected, atol=1e-15)
    # The reward is the state the move leaves.
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    for _ in range(50):
        _, reward, _, _, info = env.step(rng.integers(0, 3, 64))
        np.testing.assert_array_equal(reward, (info["state_before"] == 2).astype(np.float64))
    # Under that reward every action ties one step ahead: the task's own objective is refused,
    # the original's myopic oracle (the state entered) is not.
    with pytest.raises(ValueError, match="every action ties"):
        OneStepLookaheadPolicy(env.task, "reward")
    oracle = recipe.myopic_oracle(variant)
    corners = oracle(np.eye(3))
    np.testing.assert_array_equal(corners, (env.task.transitions[:, :, 2].argmax(axis=0)))
    env.close()


def test_the_action_symmetry_module_acts_through_collect_rollouts():
    recipe = worked_example("the action-symmetry family")
    config = recipe.build_config(2, True)
    env_config = config.env_config | {"info": ["decision_belief"]}
    env = HMMVectorEnv(1, env_config)
    spec = dataclasses.replace(
        config.rl_module_spec,
        observation_space=env.single_observation_space,
        action_space=env.single_action_space,
    )
    env.close()
    module = spec.build()
    rollouts = collect_rollouts(
        module,
        lambda n: HMMVectorEnv(n, env_config),
        n_episodes=2,
        episode_steps=4,
        seed=0,
        target=info_target("decision_belief"),
        num_envs=2,
    )
    assert rollouts.representations.shape == (2, 4, 96)
    np.testing.assert_allclose(rollouts.targets.sum(axis=-1), 1.0)
