"""Rollouts step the module once per step (issue 53 item 2): greedy and sampled actions come
from the heads on the step's own representation, and an actor's or random play reads
without an action pass. Each gives bit for bit what the two-pass stepping (the
representation, then RLlib's forward_inference / forward_exploration for the action) gave:
same actions (the same draws for sampling), representations, targets."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rl_harness.analysis import collect_rollouts, info_target, rllib_action_transform
from rl_harness.analysis.rollouts import ModuleStepper, encode_representation
from tests.analysis.test_replay import build, make_env


def two_pass(module, batch):
    """The default extractor behind another name: the stepper cannot know that the heads
    read it, so it takes RLlib's forward_inference for the action (the old stepping)."""
    return encode_representation(module, batch)


def collect(module, representation, policy="greedy", actor=None, n_episodes=5):
    space = make_env(1).single_action_space
    return collect_rollouts(
        module,
        make_env,
        n_episodes=n_episodes,
        episode_steps=24,
        warmup_steps=8,
        seed=3,
        target=info_target("decision_belief"),
        num_envs=n_episodes,
        policy=policy,
        actor=actor,
        representation=representation,
        action_transform=rllib_action_transform(space),
    )


def test_greedy_actions_from_the_heads_equal_rllibs_forward_inference():
    module = build("transformer", seed=4)
    with torch.no_grad():  # a policy head that moves: greedy actions away from the middle
        for parameter in module.pi.parameters():
            parameter.mul_(40.0)
    assert ModuleStepper(module, 2).heads_read_features
    assert not ModuleStepper(module, 2, representation=two_pass).heads_read_features
    assert ModuleStepper(module, 2, policy="sample").heads_read_features
    one, old = collect(module, encode_representation), collect(module, two_pass)
    np.testing.assert_array_equal(one.actions, old.actions)
    np.testing.assert_array_equal(one.representations, old.representations)
    np.testing.assert_array_equal(one.targets, old.targets)
    np.testing.assert_array_equal(one.observations, old.observations)
    assert one.actions.std() > 0.5  # the actions carry the policy, not a constant


def test_sampled_actions_from_the_heads_equal_rllibs_forward_exploration():
    module = build("transformer", seed=4)
    one = collect(module, encode_representation, policy="sample")
    old = collect(module, two_pass, policy="sample")
    np.testing.assert_array_equal(one.actions, old.actions)  # the same draws, in order
    np.testing.assert_array_equal(one.representations, old.representations)
    greedy = collect(module, encode_representation)
    assert not np.allclose(one.actions, greedy.actions)  # sampled, not greedy


@pytest.mark.parametrize("policy", ["random", "actor"])
def test_reading_only_play_equals_stepping_with_actions(policy):
    module = build("transformer", seed=6)
    actor = None
    if policy == "actor":

        def actor(obs, info):  # acts on the exact belief, as the belief-MDP data set does
            return 4.0 * (np.asarray(info["decision_belief"])[:, :2] - 0.3)

    kind = "greedy" if actor is not None else "random"
    one = collect(module, encode_representation, policy=kind, actor=actor)
    old = collect(module, two_pass, policy=kind, actor=actor)
    np.testing.assert_array_equal(one.actions, old.actions)
    np.testing.assert_array_equal(one.representations, old.representations)
    np.testing.assert_array_equal(one.targets, old.targets)


def test_stateless_and_recurrent_modules_keep_the_forward_pass():
    for name in ("mlp", "gru"):
        module = build(name, seed=1)
        assert not ModuleStepper(module, 2).heads_read_features
        np.testing.assert_array_equal(
            collect(module, encode_representation).actions, collect(module, two_pass).actions
        )
