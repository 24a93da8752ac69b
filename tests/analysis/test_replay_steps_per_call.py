"""Replays that read many steps per module call (issue 53 item 2): the stateful transformer's
`encode_sequence_residuals` over chunks of steps, the state carried between chunks, gives
what stepping one step at a time gives (to float rounding), for every residual, across
chunk edges, past the attention context and with a chunk that does not divide the length;
read-only rollouts (an actor's or random play) replayed afterwards equal those read every
step; what cannot read sequences is stepped as before."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from ray.rllib.core.rl_module.rl_module import RLModuleSpec

from rl_harness.analysis import (
    collect_rollouts,
    info_target,
    replay_observations,
    replay_rollouts,
    replay_rollouts_named,
    rllib_action_transform,
)
from rl_harness.analysis.module_api import SequenceResidualAPI
from rl_harness.envs.hmm import HMMVectorEnv
from rl_harness.learners.models import StatefulTransformerActorCritic
from tests.analysis.test_replay import CONTROL_CONFIG, build, make_env

TOLERANCE = dict(rtol=1e-4, atol=1e-5)


def rollouts(module, policy="random", replay_steps=None, n_episodes=4):
    space = make_env(1).single_action_space
    return collect_rollouts(
        module,
        make_env,
        n_episodes=n_episodes,
        episode_steps=30,  # with the warm-up, 40 steps: past the context of 6
        warmup_steps=10,
        seed=9,
        target=info_target("decision_belief"),
        num_envs=n_episodes,
        policy=policy,
        replay_steps=replay_steps,
        action_transform=rllib_action_transform(space),
    )


@pytest.mark.parametrize("steps_per_call", [7, 8, 40, 64])
def test_many_steps_per_call_equal_one_step_at_a_time(steps_per_call):
    module = build("transformer", seed=2)
    assert isinstance(module, SequenceResidualAPI)
    played = rollouts(module)
    one = replay_rollouts_named(module, played)
    many = replay_rollouts_named(module, played, steps_per_call=steps_per_call)
    assert list(many) == list(one) == ["embed", "block_1", "block_2", "final_norm"]
    for name in one:
        np.testing.assert_allclose(many[name], one[name], **TOLERANCE)
    final = replay_rollouts(module, played, steps_per_call=steps_per_call)
    np.testing.assert_array_equal(final, many["final_norm"])
    np.testing.assert_allclose(final, played.representations, **TOLERANCE)
    # Not a constant: the representations move over the episode and differ between rows.
    assert final.std(axis=1).mean() > 1e-3 and final.std(axis=0).mean() > 1e-3
    # Rows in batches of 3 (two batches of 4 rows) give the same.
    batched = replay_rollouts(module, played, steps_per_call=steps_per_call, batch_size=3)
    np.testing.assert_allclose(batched, final, **TOLERANCE)


def test_the_agents_own_greedy_play_replayed_64_steps_per_call_equals_its_stepping():
    """The flagship's two probe inputs on the same episodes: the representation the agent
    recorded while acting (greedy, one step of attention over its cache per env step) and
    the same episodes replayed 64 steps per call (its layer and over-training probes). Its
    shape: context 64 = the chunk, the trunk initialised N(0, 0.02) as the study's, 16
    warm-up steps then 64 recorded (chunks of 64 and 16, the first recorded step inside the
    first chunk). They are equal to float32 rounding, step by step and feature by feature;
    the smoke probe's R² then differs by what its ill-conditioned fit makes of that rounding
    (docs/probes.md, "Replayed and stepped representations")."""
    env_config = CONTROL_CONFIG | {"episode_length": 96}

    def make(num_envs):
        return HMMVectorEnv(num_envs, env_config)

    env = make(1)
    spec = RLModuleSpec(
        module_class=StatefulTransformerActorCritic,
        observation_space=env.single_observation_space,
        action_space=env.single_action_space,
        model_config={
            "init": "normal",
            "init_std": 0.02,
            "max_seq_len": 64,
            "context": 64,
            "d_model": 32,
            "num_heads": 4,
            "num_layers": 2,
            "prev_action": False,
        },
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(7)
        module = spec.build()
    played = collect_rollouts(
        module,
        make,
        n_episodes=6,
        episode_steps=64,
        warmup_steps=16,
        seed=11,
        target=info_target("decision_belief"),
        num_envs=6,
        policy="greedy",
        action_transform=rllib_action_transform(env.single_action_space),
    )
    env.close()
    stepped = played.representations
    # Replayed one step per call it is the same computation in the same kernels: the same bits.
    np.testing.assert_array_equal(replay_rollouts(module, played), stepped)
    replayed = replay_rollouts_named(module, played, steps_per_call=64)["final_norm"]
    assert replayed.shape == stepped.shape == (6, 64, 32)
    # Final-norm features of unit scale: measured 2026-12-07, at most 9.5e-7 apart (the
    # flagship's smoke agent: 1.1e-6). A wrong start (no warm-up, another cache, a shifted
    # position or step) is off by far more than 1e-5 at some step.
    assert 0.5 < stepped.std() < 2.0
    np.testing.assert_allclose(replayed, stepped, rtol=0, atol=1e-5)
    assert not np.array_equal(replayed, stepped)  # batched kernels: rounding, not bits


def test_another_module_replayed_in_chunks_reads_its_own_weights():
    agent, other = build("transformer", seed=2), build("transformer", seed=3)
    played = rollouts(agent)
    np.testing.assert_allclose(
        replay_rollouts(other, played, steps_per_call=16),
        replay_rollouts(other, played),
        **TOLERANCE,
    )
    chunked = replay_rollouts(other, played, steps_per_call=16)
    assert not np.allclose(chunked, played.representations)


@pytest.mark.parametrize("policy", ["random", "actor"])
def test_read_only_play_replayed_afterwards_equals_reading_every_step(policy):
    module = build("transformer", seed=5)
    space = make_env(1).single_action_space
    actor = None
    if policy == "actor":

        def actor(obs, info):
            return 4.0 * (np.asarray(info["decision_belief"])[:, :2] - 0.3)

    kwargs = dict(
        n_episodes=5,
        episode_steps=30,
        warmup_steps=10,
        seed=4,
        target=info_target("decision_belief"),
        num_envs=5,
        policy="random" if actor is None else "greedy",
        actor=actor,
        action_transform=rllib_action_transform(space),
    )
    every = collect_rollouts(module, make_env, **kwargs)
    later = collect_rollouts(module, make_env, replay_steps=16, **kwargs)
    for field in ("observations", "actions", "targets", "rewards", "warmup_observations"):
        np.testing.assert_array_equal(getattr(later, field), getattr(every, field))
    np.testing.assert_allclose(later.representations, every.representations, **TOLERANCE)


def test_what_cannot_read_sequences_is_stepped_as_before():
    gru = build("gru", seed=1)
    assert not isinstance(gru, SequenceResidualAPI)
    played = rollouts(gru)
    np.testing.assert_array_equal(
        replay_rollouts(gru, played, steps_per_call=16), played.representations
    )
    # Resets inside a row: stepped one step at a time, bit for bit as with 1.
    module = build("transformer", seed=2)
    observations = rollouts(module).observations
    resets = np.zeros(observations.shape[:2], dtype=bool)
    resets[:, 12] = True
    np.testing.assert_array_equal(
        replay_observations(module, observations, resets=resets, steps_per_call=16),
        replay_observations(module, observations, resets=resets),
    )
    with pytest.raises(ValueError, match="steps_per_call"):
        replay_observations(module, observations, steps_per_call=0)
    with pytest.raises(ValueError, match="replay_steps"):
        rollouts(module, replay_steps=0)
