"""Replays that read many steps per module call (issue 53 item 2): the stateful transformer's
`encode_sequence_residuals` over chunks of steps, the state carried between chunks, gives
what stepping one step at a time gives (to float rounding), for every residual, across
chunk edges, past the attention context and with a chunk that does not divide the length;
read-only rollouts (an actor's or random play) replayed afterwards equal those read every
step; what cannot read sequences is stepped as before."""

from __future__ import annotations

import numpy as np
import pytest

from rl_harness.analysis import (
    collect_rollouts,
    info_target,
    replay_observations,
    replay_rollouts,
    replay_rollouts_named,
    rllib_action_transform,
)
from rl_harness.analysis.module_api import SequenceResidualAPI
from tests.analysis.test_replay import build, make_env

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
