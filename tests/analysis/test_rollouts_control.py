"""Rollouts for long, controlled episodes: warm-up, policy modes, Box actions, info targets,
and the per-step `encode_step` read, on real (untrained) RLModules and the batched env."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from ray.rllib.core.rl_module.rl_module import RLModuleSpec

from rl_harness.analysis import collect_rollouts, info_target
from rl_harness.analysis.rollouts import random_actions, rllib_action_transform
from rl_harness.envs.hmm import HMMVectorEnv
from rl_harness.learners.models import GRUActorCritic
from rl_harness.seeding import stream_rng

W_MAX = 5.0
CONTROL_CONFIG = {
    "model": "rl_harness.envs.mess3:control_chain_model",
    "model_kwargs": {"alpha": 0.85},
    "task": "rl_harness.envs.mess3.tasks:OccupancyControlTask",
    "task_kwargs": {"w_max": W_MAX, "beta": 4.0},
    "episode_length": 60,
    "token_window": 1,
    "observation_delay": 2,
    "info": ["belief", "decision_belief", "action", "reward_components"],
}
TOKEN_CONFIG = {
    "model": "rl_harness.envs.mess3:mess3_model",
    "model_kwargs": {"x": 0.05, "alpha": 0.85},
    "task": "rl_harness.envs.mess3.tasks:NextTokenTask",
    "episode_length": 30,
    "token_window": 1,
    "info": ["belief"],
}


def control_env(num_envs: int) -> HMMVectorEnv:
    return HMMVectorEnv(num_envs, CONTROL_CONFIG)


def token_env(num_envs: int) -> HMMVectorEnv:
    return HMMVectorEnv(num_envs, TOKEN_CONFIG)


def build(module_class, make_env, seed: int = 0):
    env = make_env(1)
    spec = RLModuleSpec(
        module_class=module_class,
        observation_space=env.single_observation_space,
        action_space=env.single_action_space,
        model_config={"max_seq_len": 8, "hidden_size": 8},
    )
    env.close()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return spec.build()


class StepReadGRU(GRUActorCritic):
    """A stateful module with its own per-step read (one step, no time axis, as
    StatefulTransformerActorCritic's): the hidden state plus a marker."""

    def encode_step(self, batch):
        step = {"obs": batch["obs"][:, None], "state_in": batch["state_in"]}
        return self.encode(step)[:, 0] + 100.0


@pytest.fixture(scope="module")
def box_module():
    return build(GRUActorCritic, control_env)


def test_warmup_is_played_but_not_recorded(box_module):
    kwargs = dict(n_episodes=5, seed=3, num_envs=5, target=info_target("decision_belief"))
    whole = collect_rollouts(box_module, control_env, episode_steps=50, **kwargs)
    late = collect_rollouts(box_module, control_env, episode_steps=20, warmup_steps=30, **kwargs)
    assert late.representations.shape == (5, 20, 8) and late.actions.shape == (5, 20, 2)
    np.testing.assert_array_equal(late.targets, whole.targets[:, 30:])
    np.testing.assert_array_equal(late.rewards, whole.rewards[:, 30:])
    np.testing.assert_allclose(late.representations, whole.representations[:, 30:], atol=1e-6)
    with pytest.raises(ValueError, match="before warmup_steps \\+ episode_steps = 70"):
        collect_rollouts(box_module, control_env, episode_steps=20, warmup_steps=50, **kwargs)


def test_box_actions_in_every_policy_mode(box_module):
    target = info_target("decision_belief", "belief", "reward_components/occupancy")
    kwargs = dict(n_episodes=4, episode_steps=12, seed=1, num_envs=4, target=target)
    greedy = collect_rollouts(box_module, control_env, **kwargs)
    assert greedy.targets.shape == (4, 12, 7)
    np.testing.assert_allclose(greedy.targets[..., :3].sum(-1), 1.0)
    # With a delay of 2 the decision belief lags the privileged one.
    assert not np.allclose(greedy.targets[:, 3:, :3], greedy.targets[:, 3:, 3:6])
    again = collect_rollouts(box_module, control_env, **kwargs)
    np.testing.assert_array_equal(greedy.actions, again.actions)

    sampled = collect_rollouts(box_module, control_env, policy="sample", **kwargs)
    assert sampled.actions.shape == (4, 12, 2) and sampled.actions.dtype.kind == "f"
    assert not np.allclose(sampled.actions, greedy.actions)
    np.testing.assert_array_equal(
        sampled.actions,
        collect_rollouts(box_module, control_env, policy="sample", **kwargs).actions,
    )

    played = collect_rollouts(box_module, control_env, policy="random", **kwargs)
    rng = stream_rng(1, "analysis", "rollouts", "random_actions")
    space = gym.spaces.Box(-W_MAX, W_MAX, (2,), np.float32)
    expected = np.stack([random_actions(space, 4, rng) for _ in range(12)], axis=1)
    np.testing.assert_array_equal(played.actions, expected)
    assert np.abs(played.actions).max() > 2.0  # uniform over the whole box
    # The module still read every observation: its representations follow the random play.
    assert not np.allclose(played.representations, greedy.representations)


def test_action_transform_is_what_the_env_executes(box_module):
    transform = rllib_action_transform(gym.spaces.Box(-W_MAX, W_MAX, (2,), np.float32))
    kwargs = dict(n_episodes=3, episode_steps=10, seed=2, num_envs=3, policy="sample")
    raw = collect_rollouts(box_module, control_env, target=info_target("action"), **kwargs)
    scaled = collect_rollouts(
        box_module, control_env, target=info_target("action"), action_transform=transform, **kwargs
    )
    # The first actions see the same observations; later ones differ with the play.
    np.testing.assert_allclose(
        scaled.actions[:, 0], np.clip(W_MAX * raw.actions[:, 0], -W_MAX, W_MAX), rtol=1e-6
    )
    # info["action"] at step t+1 is the action executed at step t.
    np.testing.assert_allclose(scaled.targets[:, 1:], scaled.actions[:, :-1], rtol=1e-6)


def test_encode_step_is_the_per_step_read_of_a_stateful_module():
    module = build(StepReadGRU, token_env, seed=4)
    rollouts = collect_rollouts(
        module,
        token_env,
        n_episodes=3,
        episode_steps=30,
        seed=0,
        num_envs=3,
        target=info_target("belief"),
        policy="random",
    )
    with torch.no_grad():
        whole = module.encode({"obs": torch.as_tensor(rollouts.observations)}).numpy()
    np.testing.assert_allclose(rollouts.representations, whole + 100.0, atol=1e-5)
    assert set(np.unique(rollouts.actions)) <= {0, 1, 2}


def test_rollout_options_are_checked(box_module):
    kwargs = dict(n_episodes=1, episode_steps=2, seed=0, target=info_target("belief"))
    with pytest.raises(ValueError, match="policy must be one of greedy, sample, random"):
        collect_rollouts(box_module, control_env, policy="best", **kwargs)
    with pytest.raises(ValueError, match="warmup_steps must be an int >= 0"):
        collect_rollouts(box_module, control_env, warmup_steps=-1, **kwargs)
    with pytest.raises(KeyError, match="has no entry 'missing'"):
        collect_rollouts(
            box_module,
            control_env,
            **(kwargs | {"target": info_target("reward_components/missing")}),
        )
    with pytest.raises(ValueError, match="bounded Box"):
        random_actions(gym.spaces.Box(-np.inf, np.inf, (2,)), 1, np.random.default_rng(0))
