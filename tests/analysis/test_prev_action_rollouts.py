"""collect_rollouts and replay step a module that reads the previous action from RLlib's
connectors (the migration guide's worked example), feeding it what the connectors feed it."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from rl_harness.analysis import (
    ModuleStepper,
    collect_rollouts,
    info_target,
    replay_observations,
    replay_rollouts,
    rllib_action_transform,
)
from rl_harness.envs.hmm import HMMVectorEnv
from rl_harness.learners.models import PREV_ACTIONS
from tests.test_migrating_doc import worked_example


def example_module_and_env():
    config = worked_example().build_config(True)
    env_config = dict(config.env_config) | {"info": ["decision_belief"]}
    env = HMMVectorEnv(1, env_config)
    spec = dataclasses.replace(
        config.rl_module_spec,
        observation_space=env.single_observation_space,
        action_space=env.single_action_space,
    )
    env.close()
    torch.manual_seed(0)
    return spec.build(), env_config


def test_collect_rollouts_feeds_the_previous_action_like_the_connectors():
    module, env_config = example_module_and_env()
    assert module.prev_action_width() == 2
    rollouts = collect_rollouts(
        module,
        lambda n: HMMVectorEnv(n, env_config),
        n_episodes=3,
        episode_steps=5,
        warmup_steps=2,
        seed=0,
        target=info_target("decision_belief"),
        policy="sample",
        num_envs=3,
    )
    # Rebuild each step by hand as RLlib's PrevActionToBatch builds it: zeros before the first
    # action, then the action taken on the previous step.
    observations = np.concatenate([rollouts.warmup_observations, rollouts.observations], axis=1)
    actions = np.concatenate([rollouts.warmup_actions, rollouts.actions], axis=1)
    state = {k: torch.as_tensor(np.stack([v] * 3)) for k, v in module.get_initial_state().items()}
    expected = []
    with torch.inference_mode():
        for t in range(observations.shape[1]):
            prev = np.zeros((3, 2), np.float32) if t == 0 else actions[:, t - 1]
            batch = {
                "obs": torch.as_tensor(observations[:, t]),
                PREV_ACTIONS: torch.as_tensor(prev, dtype=torch.float32),
                "state_in": state,
            }
            representation, state = module.encode_step(batch)
            expected.append(representation.numpy())
    expected = np.stack(expected, axis=1)[:, 2:]
    np.testing.assert_allclose(rollouts.representations, expected, rtol=1e-5, atol=1e-5)
    # The previous action matters: the same observations with zeros read differently.
    assert np.abs(actions).max() > 0
    # Replay reads the rollouts' own actions and rebuilds the same representations.
    np.testing.assert_allclose(
        replay_rollouts(module, rollouts), rollouts.representations, rtol=1e-5, atol=1e-5
    )


def test_a_step_without_the_previous_action_fails_instead_of_reading_zeros():
    module, env_config = example_module_and_env()
    env = HMMVectorEnv(2, env_config)
    obs, _ = env.reset(seed=0)
    env.close()
    stepper = ModuleStepper(module, 2)
    stepper.read(obs)  # the first step reads zeros, as the connector writes
    with pytest.raises(ValueError, match="reads the previous action"):
        stepper.read(obs)
    stepper.note_actions(np.ones((2, 2), np.float32))
    stepper.read(obs)


def collect_example(module, env_config, **options):
    kwargs = dict(
        n_episodes=3,
        episode_steps=20,
        warmup_steps=6,
        seed=1,
        target=info_target("decision_belief"),
        num_envs=3,
    )
    return collect_rollouts(module, lambda n: HMMVectorEnv(n, env_config), **(kwargs | options))


@pytest.mark.parametrize("steps_per_call", [5, 64])
def test_replays_of_many_steps_per_call_feed_the_previous_actions(steps_per_call):
    """The sequence replay (issue 53) shifts the actions in as stepping feeds them: zeros at a
    row's first step, then the previous step's action, across chunk edges."""
    module, env_config = example_module_and_env()
    played = collect_example(module, env_config, policy="sample")
    stepped = replay_rollouts(module, played)
    many = replay_rollouts(module, played, steps_per_call=steps_per_call)
    np.testing.assert_allclose(many, stepped, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(many, played.representations, rtol=1e-4, atol=1e-5)
    # Without the actions a module reading them is not replayed on zeros: the stepping path
    # refuses with its one line.
    with pytest.raises(ValueError, match="reads the previous action"):
        replay_observations(module, played.observations, steps_per_call=steps_per_call)
    # The actions matter: the same observations with other actions read differently.
    others = np.roll(played.actions, 1, axis=0)
    moved = replay_observations(
        module, played.observations, actions=others, steps_per_call=steps_per_call
    )
    assert not np.allclose(
        moved[:, 2:],
        replay_observations(
            module, played.observations, actions=played.actions, steps_per_call=steps_per_call
        )[:, 2:],
        atol=1e-4,
    )


@pytest.mark.parametrize("policy", ["random", "actor"])
def test_read_only_play_replayed_afterwards_feeds_the_played_actions(policy):
    """collect_rollouts(replay_steps=): random or an actor's play, replayed after the episodes,
    gives the module what reading every step gave it (the actions played, shifted in)."""
    module, env_config = example_module_and_env()
    actor = None
    if policy == "actor":

        def actor(obs, info):
            return 2.0 * (np.asarray(info["decision_belief"])[:, :2] - 0.3)

    options = dict(policy="random" if actor is None else "greedy", actor=actor)
    every = collect_example(module, env_config, **options)
    later = collect_example(module, env_config, replay_steps=8, **options)
    np.testing.assert_array_equal(later.actions, every.actions)
    assert np.abs(every.actions).max() > 0
    np.testing.assert_allclose(later.representations, every.representations, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("policy", ["greedy", "sample"])
def test_replay_feeds_the_modules_own_actions_when_a_transform_maps_them(policy):
    """With RLlib's Box handling (`rllib_action_transform`: the module acts in [-1, 1], the
    env gets [-5, 5]) the env executes the unsquashed action but the module's `prev_actions`
    read its own sample, as RLlib's episode stores it. A replay of its own rollouts reads
    those (`Rollouts.module_actions`), not the executed ones: stepping again gives the
    recorded representations bit for bit, 64 steps per call to float rounding. (Before,
    replay fed the executed actions: up to 2.7 off.)"""
    module, env_config = example_module_and_env()
    space = HMMVectorEnv(1, env_config).single_action_space
    transform = rllib_action_transform(space)
    played = collect_example(module, env_config, policy=policy, action_transform=transform)
    # The executed actions are the module's, mapped: a different input, so the test bites.
    fed = played.module_actions
    assert fed is not None and fed.shape == (3, 6 + 20, 2)
    np.testing.assert_array_equal(played.warmup_actions, transform(fed[:, :6]))
    np.testing.assert_array_equal(played.actions, transform(fed[:, 6:]))
    assert np.abs(played.actions - fed[:, 6:]).max() > (0.5 if policy == "sample" else 0.01)
    np.testing.assert_array_equal(replay_rollouts(module, played), played.representations)
    np.testing.assert_allclose(
        replay_rollouts(module, played, steps_per_call=64),
        played.representations,
        rtol=0,
        atol=1e-5,
    )
    # A cut keeps each episode's warm-up with its first steps.
    cut = played.head(2, steps=7)
    assert cut.module_actions is not None
    np.testing.assert_array_equal(cut.module_actions, fed[:2, : 6 + 7])
    np.testing.assert_array_equal(replay_rollouts(module, cut), played.representations[:2, :7])
    # Without a transform (or with an actor or random play) the executed actions are the
    # ones the module read, and none are kept twice.
    assert collect_example(module, env_config, policy=policy).module_actions is None
