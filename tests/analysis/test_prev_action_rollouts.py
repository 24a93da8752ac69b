"""collect_rollouts and replay step a module that reads the previous action from RLlib's
connectors (the migration guide's worked example), feeding it what the connectors feed it."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from rl_harness.analysis import ModuleStepper, collect_rollouts, info_target, replay_rollouts
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
