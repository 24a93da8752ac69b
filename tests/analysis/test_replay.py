"""Replay: a module reading recorded observations gives exactly the representations it gave
while acting (MLP, GRU, stateful transformer), another module gives its own, resets and
carried state behave as in an episode, and every residual comes from one pass."""

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
from rl_harness.analysis.replay import replay_named_representations
from rl_harness.envs.hmm import HMMVectorEnv
from rl_harness.learners.models import (
    GRUActorCritic,
    MLPActorCritic,
    StatefulTransformerActorCritic,
    TransformerActorCritic,
)

CONTROL_CONFIG = {
    "model": "rl_harness.envs.mess3:control_chain_model",
    "model_kwargs": {"alpha": 0.85},
    "task": "rl_harness.envs.mess3.tasks:OccupancyControlTask",
    "task_kwargs": {"w_max": 5.0, "beta": 4.0, "occupancy_states": [2]},
    "episode_length": 64,
    "observation_delay": 1,
    "token_window": 1,
    "action_window": 1,
    "info": ["decision_belief"],
}
MODELS = {
    "mlp": (MLPActorCritic, {"hidden_sizes": [16, 16]}),
    "gru": (GRUActorCritic, {"max_seq_len": 8, "hidden_size": 8}),
    "transformer": (
        StatefulTransformerActorCritic,
        {
            "max_seq_len": 8,
            "context": 6,
            "d_model": 16,
            "num_heads": 2,
            "num_layers": 2,
            "prev_action": False,
        },
    ),
}


def make_env(num_envs: int) -> HMMVectorEnv:
    return HMMVectorEnv(num_envs, CONTROL_CONFIG)


def build(name: str, seed: int):
    module_class, model_config = MODELS[name]
    env = make_env(1)
    spec = RLModuleSpec(
        module_class=module_class,
        observation_space=env.single_observation_space,
        action_space=env.single_action_space,
        model_config=model_config,
    )
    env.close()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return spec.build()


def rollouts_of(module, **options):
    space = make_env(1).single_action_space
    kwargs = dict(
        n_episodes=6,
        episode_steps=20,
        warmup_steps=10,  # longer than the transformer's context: the cache has wrapped
        seed=3,
        num_envs=4,  # two batches, the second smaller
        target=info_target("decision_belief"),
        action_transform=rllib_action_transform(space),
        policy="sample",
    )
    return collect_rollouts(module, make_env, **(kwargs | options))


@pytest.mark.parametrize("name", sorted(MODELS))
def test_replaying_a_modules_own_rollouts_reproduces_its_representations(name):
    module = build(name, seed=0)
    rollouts = rollouts_of(module)
    assert rollouts.warmup_observations.shape == (6, 10, 5) and rollouts.num_envs == 4
    replayed = replay_rollouts(module, rollouts)
    np.testing.assert_array_equal(replayed, rollouts.representations)
    # Batching differently changes float rounding at most (the transformer's attention).
    np.testing.assert_allclose(replay_rollouts(module, rollouts, batch_size=6), replayed, atol=1e-5)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_another_module_gives_its_own_representations_of_the_same_observations(name):
    agent, control = build(name, seed=0), build(name, seed=1)
    rollouts = rollouts_of(agent)
    replayed = replay_rollouts(control, rollouts)
    assert replayed.shape == rollouts.representations.shape
    assert not np.allclose(replayed, rollouts.representations, atol=1e-3)
    # The control read the agent's observations, warm-up included: the same as encoding the
    # whole recorded sequence at once (stateful modules from their initial state).
    sequence = np.concatenate([rollouts.warmup_observations, rollouts.observations], axis=1)
    with torch.no_grad():
        whole = control.encode({"obs": torch.as_tensor(sequence)}).numpy()
    np.testing.assert_allclose(replayed, whole[:, 10:], atol=1e-5)


@pytest.mark.parametrize("name", ["gru", "transformer"])
def test_resets_start_a_new_episode_inside_a_sequence(name):
    module = build(name, seed=2)
    rng = np.random.default_rng(0)
    first = rng.random((3, 9, 5)).astype(np.float32)
    second = rng.random((3, 7, 5)).astype(np.float32)
    joined = np.concatenate([first, second], axis=1)
    resets = np.zeros((3, 16), dtype=bool)
    resets[:, 9] = True
    apart = np.concatenate(
        [replay_observations(module, first), replay_observations(module, second)], axis=1
    )
    np.testing.assert_array_equal(replay_observations(module, joined, resets=resets), apart)
    # Without the reset the state carries over and the second part reads differently.
    carried = replay_observations(module, joined)
    np.testing.assert_array_equal(carried[:, :9], apart[:, :9])
    assert not np.allclose(carried[:, 9:], apart[:, 9:], atol=1e-4)
    # A reset in one row leaves the others alone.
    only_one = resets.copy()
    only_one[1:, 9] = False
    mixed = replay_observations(module, joined, resets=only_one)
    np.testing.assert_array_equal(mixed[0], apart[0])
    np.testing.assert_array_equal(mixed[1:], carried[1:])


def test_every_residual_from_one_pass_ends_in_the_probed_representation():
    module = build("transformer", seed=0)
    rollouts = rollouts_of(module)
    named = replay_rollouts_named(module, rollouts)
    assert list(named) == ["embed", "block_1", "block_2", "final_norm"]
    np.testing.assert_array_equal(named["final_norm"], rollouts.representations)
    assert all(values.shape == (6, 20, 16) for values in named.values())
    assert not np.allclose(named["block_2"], named["final_norm"])


def test_replay_rejects_what_it_cannot_read():
    module = build("mlp", seed=0)
    obs = np.zeros((2, 3, 5), dtype=np.float32)
    with pytest.raises(ValueError, match="resets must be a bool"):
        replay_observations(module, obs, resets=np.zeros((2, 4), dtype=bool))
    with pytest.raises(ValueError, match="batch_size must be a positive int"):
        replay_observations(module, obs, batch_size=0)
    with pytest.raises(TypeError, match="has no encode_step_residuals"):
        replay_named_representations(module, obs)


def test_a_stateless_window_transformer_gives_every_residual_too():
    config = {
        "model": "rl_harness.envs.mess3:mess3_model",
        "model_kwargs": {"x": 0.05, "alpha": 0.85},
        "task": "rl_harness.envs.mess3.tasks:NextTokenTask",
        "episode_length": 20,
        "token_window": 4,
        "info": ["belief"],
    }

    def token_env(num_envs: int) -> HMMVectorEnv:
        return HMMVectorEnv(num_envs, config)

    env = token_env(1)
    spec = RLModuleSpec(
        module_class=TransformerActorCritic,
        observation_space=env.single_observation_space,
        action_space=env.single_action_space,
        model_config={
            "context_len": 4,
            "feature_dim": 3,
            "newest_first": True,
            "d_model": 16,
            "num_heads": 2,
            "num_layers": 2,
        },
    )
    env.close()
    torch.manual_seed(0)
    module = spec.build()
    rollouts = collect_rollouts(
        module,
        token_env,
        n_episodes=3,
        episode_steps=12,
        warmup_steps=4,
        seed=0,
        num_envs=3,
        target=info_target("belief"),
        policy="random",
    )
    named = replay_rollouts_named(module, rollouts)
    assert list(named) == ["embed", "block_1", "block_2", "final_norm"]
    np.testing.assert_array_equal(named["final_norm"], rollouts.representations)
    np.testing.assert_array_equal(replay_rollouts(module, rollouts), rollouts.representations)
