"""RLlib 2.60 builds the batched env through the registered vector entry point."""

from __future__ import annotations

import numpy as np
from ray.rllib.algorithms.ppo import PPOConfig
from ray.rllib.env.single_agent_env_runner import SingleAgentEnvRunner

from rl_harness.envs.hmm import ENV_ID, REGISTERED_ENV_ID, HMMVectorEnv
from tests.envs.helpers import mess3_config


def sample_with(env_id: str, mode: str):
    config = (
        PPOConfig()
        .environment(env_id, env_config=mess3_config(episode_length=8, info=["belief", "token"]))
        .env_runners(
            num_env_runners=0,
            num_envs_per_env_runner=4,
            gym_env_vectorize_mode=mode,
            rollout_fragment_length=16,
        )
        .debugging(seed=3)
    )
    runner = SingleAgentEnvRunner(config=config)
    try:
        return runner, runner.sample(num_timesteps=64)
    finally:
        runner.stop()


def test_env_runner_uses_the_batched_env_and_matches_sync_vectorization():
    # ENV_ID imports the package first (what remote env runners need); both ids name the
    # same env.
    batched_runner, batched = sample_with(ENV_ID, "vector_entry_point")
    sync_runner, synced = sample_with(REGISTERED_ENV_ID, "sync")
    assert isinstance(batched_runner.env.unwrapped, HMMVectorEnv)
    assert not isinstance(sync_runner.env.unwrapped, HMMVectorEnv)
    assert len(batched) == len(synced) > 4
    for got, want in zip(batched, synced, strict=True):
        np.testing.assert_array_equal(got.get_observations(), want.get_observations())
        np.testing.assert_array_equal(got.get_actions(), want.get_actions())
        np.testing.assert_array_equal(got.get_rewards(), want.get_rewards())
        infos = got.get_infos()
        assert all(info["belief"].shape == (3,) for info in infos)
        assert [info["token"] for info in infos] == [info["token"] for info in want.get_infos()]
