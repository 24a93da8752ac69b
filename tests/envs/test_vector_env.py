"""HMMVectorEnv: the same trajectories as N single envs, registration, batched errors."""

from __future__ import annotations

import json
import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import SyncVectorEnv

from rl_harness.envs.hmm import ENV_ID, HMMEnv, HMMVectorEnv, register_envs
from tests.envs.helpers import ALL_INFO, mess3_config

CONTROLLED = {
    "task": "rl_harness.envs.mess3.tasks:ControlledTask",
    "task_kwargs": {"tilt": 1.5, "state_rewards": [1.0, 0.0, 0.0], "kl_cost": 0.3},
}


def assert_same_info(batched: dict, reference: dict) -> None:
    assert batched.keys() == reference.keys()
    for key, value in reference.items():
        if isinstance(value, dict):
            assert_same_info(batched[key], value)
        else:
            np.testing.assert_array_equal(batched[key], value, err_msg=key)


def run_side_by_side(config: dict, n: int, n_steps: int, seed) -> int:
    vector = HMMVectorEnv(n, config)
    reference = SyncVectorEnv([lambda: HMMEnv(config) for _ in range(n)])
    obs, info = vector.reset(seed=seed)
    ref_obs, ref_info = reference.reset(seed=seed)
    np.testing.assert_array_equal(obs, ref_obs)
    assert_same_info(info, ref_info)
    rng = np.random.default_rng(0)
    n_truncated = 0
    for _ in range(n_steps):
        actions = rng.integers(0, vector.single_action_space.n, n)
        batched = vector.step(actions)
        expected = reference.step(actions)
        for got, want in zip(batched[:4], expected[:4], strict=True):
            np.testing.assert_array_equal(got, want)
        assert batched[1].dtype == np.float64 and batched[0].dtype == np.float32
        assert_same_info(batched[4], expected[4])
        n_truncated += int(batched[3].sum())
    return n_truncated


@pytest.mark.parametrize(
    "overrides",
    [
        {"episode_length": 9, "random_first_episode_length": True, "info": ALL_INFO},
        {
            **CONTROLLED,
            "episode_length": 5,
            "token_window": 3,
            "action_window": 2,
            "include_belief": True,
            "include_state": True,
            "observation_delay": 1,
            "info": ALL_INFO,
        },
        {"task": "rl_harness.envs.mess3.tasks:PassiveTask", "episode_length": 4},
    ],
    ids=["next_token", "controlled_all_options", "passive_no_info"],
)
def test_vector_env_matches_single_envs_across_autoresets(overrides):
    # 1100 steps cross the 1024-draw block boundary of the pre-drawn uniforms.
    truncated = run_side_by_side(mess3_config(**overrides), n=5, n_steps=1100, seed=40)
    assert truncated > 100


def test_seed_lists_and_unseeded_resets_match_single_envs():
    config = mess3_config(episode_length=6, info=["token", "state"])
    run_side_by_side(config, n=3, n_steps=30, seed=[5, 9, 2])
    vector = HMMVectorEnv(3, config)
    reference = SyncVectorEnv([lambda: HMMEnv(config) for _ in range(3)])
    vector.reset(seed=[5, 9, 2])
    reference.reset(seed=[5, 9, 2])
    for seed in ([None, 11, None], None):  # None: continue each copy's own streams
        obs, info = vector.reset(seed=seed)
        ref_obs, ref_info = reference.reset(seed=seed)
        np.testing.assert_array_equal(obs, ref_obs)
        assert_same_info(info, ref_info)
        for _ in range(8):
            actions = np.zeros(3, dtype=np.int64)
            assert_same_info(vector.step(actions)[4], reference.step(actions)[4])


def test_registration_builds_the_batched_env_for_vector_entry_point():
    register_envs()
    register_envs()  # idempotent
    config = mess3_config(info=["belief"])
    batched = gym.make_vec(ENV_ID, num_envs=4, vectorization_mode="vector_entry_point", **config)
    assert isinstance(batched, HMMVectorEnv) and batched.num_envs == 4
    assert batched.metadata["autoreset_mode"] == gym.vector.AutoresetMode.NEXT_STEP
    synced = gym.make_vec(ENV_ID, num_envs=2, vectorization_mode="sync", **config)
    assert isinstance(synced, SyncVectorEnv)
    assert isinstance(gym.make(ENV_ID, **config).unwrapped, HMMEnv)
    obs, info = batched.reset(seed=0)
    assert obs.shape == (4, 24) and info["belief"].shape == (4, 3)
    assert batched.action_space.shape == (4,)


def test_importing_id_registers_the_env_in_a_fresh_process():
    # Like an RLlib remote env runner: a process that never imported rl_harness.envs.hmm.
    code = (
        "import json, sys, gymnasium as gym\n"
        "env = gym.make_vec(sys.argv[1], num_envs=3, vectorization_mode='vector_entry_point',"
        " **json.loads(sys.argv[2]))\n"
        "print(type(env).__name__, env.reset(seed=0)[0].shape)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code, ENV_ID, json.dumps(mess3_config())],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    assert result.stdout.split() == ["HMMVectorEnv", "(3,", "24)"]


def test_batched_actions_are_checked_and_ignored_while_auto_resetting():
    vector = HMMVectorEnv(3, mess3_config(episode_length=2))
    vector.reset(seed=0)
    with pytest.raises(ValueError, match=r"shape \(3,\)"):
        vector.step(np.zeros(2, dtype=np.int64))
    with pytest.raises(ValueError, match="action 7 is outside"):
        vector.step(np.array([0, 7, 1]))
    with pytest.raises(ValueError, match="integers"):
        vector.step(np.zeros(3))
    vector.step(np.zeros(3, dtype=np.int64))
    truncated = vector.step(np.zeros(3, dtype=np.int64))[3]
    assert truncated.all()
    # Every copy auto-resets now, so its action is ignored (as in SyncVectorEnv).
    obs, rewards, _, truncated, _ = vector.step(np.array([9, -4, 100]))
    assert not truncated.any() and not rewards.any() and not obs.any()


def test_bad_num_envs_and_options_raise():
    with pytest.raises(ValueError, match="num_envs must be a positive int"):
        HMMVectorEnv(0, mess3_config())
    with pytest.raises(ValueError, match="takes no options"):
        HMMVectorEnv(1, mess3_config()).reset(options={"reset_mask": np.ones(1, bool)})
    with pytest.raises(TypeError, match="either as one mapping or as keywords"):
        HMMVectorEnv(1, mess3_config(), episode_length=3)
