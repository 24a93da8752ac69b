"""A windowed transformer reads its positions by name; a mismatched window fails at build."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from ray.rllib.core.columns import Columns
from ray.rllib.core.rl_module.rl_module import RLModuleSpec

from rl_harness.envs.hmm import HMMVectorEnv
from rl_harness.learners.models import TransformerActorCritic
from rl_harness.learners.models.spaces import window_inputs

# The case: a 10-token and a 10-action window (MESS3 guessing, 3 tokens, 3 actions).
ENV = {
    "model": "rl_harness.envs.mess3:mess3_model",
    "model_kwargs": {"x": 0.05, "alpha": 0.85},
    "task": "rl_harness.envs.mess3.tasks:NextTokenTask",
    "token_window": 10,
    "action_window": 10,
    "episode_length": 32,
}
SMALL = {"d_model": 16, "num_heads": 2, "num_layers": 1, "newest_first": True}


def _spec(env: HMMVectorEnv, model_config: dict) -> RLModuleSpec:
    return RLModuleSpec(
        module_class=TransformerActorCritic,
        observation_space=env.single_observation_space,
        action_space=env.single_action_space,
        model_config=model_config,
    )


def test_a_token_and_action_window_never_reads_token_token_pairs():
    env = HMMVectorEnv(1, ENV)  # flat Box of 60 floats: 10 x 3 tokens, then 10 x 3 actions
    # Before: context_len 10 split the 60 floats into 10 positions of 6, i.e. (token, token).
    with pytest.raises(ValueError, match="feature_dim"):
        _spec(env, {"context_len": 10} | SMALL).build()
    with pytest.raises(ValueError, match="context_len.*feature_dim.*= 60"):
        _spec(env, {"context_len": 10, "feature_dim": 3} | SMALL).build()
    with pytest.raises(ValueError, match="window_keys"):
        _spec(env, {"context_len": 10, "window_keys": ["tokens", "actions"]} | SMALL).build()


def test_told_the_keys_it_reads_token_action_pairs():
    env = HMMVectorEnv(2, ENV | {"dict_observation": True})
    assert set(env.single_observation_space.spaces) == {"tokens", "actions"}
    module = _spec(env, {"context_len": 10, "window_keys": ["tokens", "actions"]} | SMALL).build()
    assert module.layout.feature_dim == 6 and module.layout.keys == ("tokens", "actions")
    obs, _ = env.reset(seed=0)
    rng = np.random.default_rng(0)
    for _ in range(12):
        obs, *_ = env.step(rng.integers(0, 3, 2))
    batch = {key: torch.as_tensor(value) for key, value in obs.items()}
    positions = window_inputs(batch, module.layout)
    assert positions.shape == (2, 10, 6)
    # Position p is (the token emitted by move t-1-p, the action of that move).
    np.testing.assert_array_equal(positions[..., :3].numpy(), obs["tokens"])
    np.testing.assert_array_equal(positions[..., 3:].numpy(), obs["actions"])
    out = module.forward_inference({Columns.OBS: batch})
    assert out[Columns.ACTION_DIST_INPUTS].shape == (2, 3)
    # The previous action reaches the representation.
    edited = dict(batch, actions=batch["actions"].roll(1, dims=-1))
    with torch.no_grad():
        gap = (module.encode({Columns.OBS: edited}) - module.encode({Columns.OBS: batch})).abs()
    assert gap.amax() > 1e-4


def test_dict_window_errors_name_the_problem():
    belief = HMMVectorEnv(1, ENV | {"dict_observation": True, "include_belief": True})
    with pytest.raises(ValueError, match="'belief' must be a Box of shape \\(positions"):
        _spec(belief, {"window_keys": ["tokens", "belief"]} | SMALL).build()
    with pytest.raises(ValueError, match="lacks"):
        _spec(belief, {"window_keys": ["tokens", "prev"]} | SMALL).build()
    with pytest.raises(ValueError, match="needs model_config\\['window_keys'\\]"):
        _spec(belief, SMALL).build()
    shorter = HMMVectorEnv(1, ENV | {"dict_observation": True, "action_window": 4})
    with pytest.raises(ValueError, match="same number of positions"):
        _spec(shorter, {"window_keys": ["tokens", "actions"]} | SMALL).build()


@pytest.mark.slow  # about 100 s on the shared 2-core machine (Ray start)
def test_ppo_trains_on_named_windows():
    from rl_harness.envs.hmm import ENV_ID
    from tests.learners.ppo_setup import tiny_ppo_config

    config = tiny_ppo_config(
        TransformerActorCritic,
        {"context_len": 10, "window_keys": ["tokens", "actions"]} | SMALL,
        env=ENV_ID,
        env_config=ENV | {"dict_observation": True},
    ).env_runners(gym_env_vectorize_mode="vector_entry_point", num_envs_per_env_runner=2)
    algo = config.build_algo()
    try:
        result = algo.train()
    finally:
        algo.stop()
    assert result["env_runners"]["num_env_steps_sampled"] >= 128
