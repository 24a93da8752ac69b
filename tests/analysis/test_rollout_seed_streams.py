"""`collect_rollouts(..., stream=...)` seeds its episodes from the stream it is given.

Episode i is reset with `stream_seed(seed, *stream, "episode", str(i))`: two streams give
different episodes, each the same on every call, and the recorded seeds are the ones the
env was reset with (replayed here on a fresh env; MESS3's next-token process does not
depend on the actions, so the belief targets follow from the seed alone).
"""

from __future__ import annotations

import numpy as np
import torch
from ray.rllib.core.rl_module.rl_module import RLModuleSpec

from rl_harness.analysis import collect_rollouts, info_target
from rl_harness.envs.hmm import HMMVectorEnv
from rl_harness.learners.models import GRUActorCritic
from rl_harness.seeding import stream_seed

STEPS = 12
CONFIG = {
    "model": "rl_harness.envs.mess3:mess3_model",
    "model_kwargs": {"x": 0.05, "alpha": 0.85},
    "task": "rl_harness.envs.mess3.tasks:NextTokenTask",
    "episode_length": STEPS,
    "token_window": 1,
    "info": ["belief"],
}
STREAM_A = ("probes", "layer_a")
STREAM_B = ("probes", "layer_b")


def make_env(num_envs: int) -> HMMVectorEnv:
    return HMMVectorEnv(num_envs, CONFIG)


def untrained_gru():
    env = make_env(1)
    spec = RLModuleSpec(
        module_class=GRUActorCritic,
        observation_space=env.single_observation_space,
        action_space=env.single_action_space,
        model_config={"max_seq_len": 8, "hidden_size": 8},
    )
    env.close()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        return spec.build()


def replayed_beliefs(seed: int) -> np.ndarray:
    """The belief before each of the first STEPS actions of an episode reset with `seed`."""
    env = make_env(1)
    beliefs = [env.reset(seed=seed)[1]["belief"][0]]
    for _ in range(STEPS - 1):
        beliefs.append(env.step(np.zeros(1, dtype=np.int64))[4]["belief"][0])
    env.close()
    return np.array(beliefs)


def test_episode_seeds_come_from_the_given_stream():
    module = untrained_gru()
    kwargs = dict(n_episodes=5, episode_steps=STEPS, seed=3, target=info_target("belief"))
    a = collect_rollouts(module, make_env, num_envs=3, stream=STREAM_A, **kwargs)
    b = collect_rollouts(module, make_env, num_envs=3, stream=STREAM_B, **kwargs)
    a_again = collect_rollouts(module, make_env, num_envs=5, stream=STREAM_A, **kwargs)

    for stream, rollouts in ((STREAM_A, a), (STREAM_B, b)):
        expected = [stream_seed(3, *stream, "episode", str(i)) for i in range(5)]
        assert rollouts.episode_seeds.tolist() == expected
        for i, seed in enumerate(expected):  # the env really was reset with these seeds
            np.testing.assert_allclose(rollouts.targets[i], replayed_beliefs(seed), atol=1e-12)

    assert not set(a.episode_seeds.tolist()) & set(b.episode_seeds.tolist())
    assert not np.array_equal(a.targets, b.targets)
    np.testing.assert_array_equal(a_again.episode_seeds, a.episode_seeds)
    np.testing.assert_array_equal(a_again.targets, a.targets)

    # The default stream is ("analysis", "rollouts"), different from both.
    default = collect_rollouts(module, make_env, num_envs=5, **kwargs)
    expected = [stream_seed(3, "analysis", "rollouts", "episode", str(i)) for i in range(5)]
    assert default.episode_seeds.tolist() == expected


def test_random_and_sampled_actions_come_from_the_given_stream_too():
    module = untrained_gru()
    kwargs = dict(n_episodes=4, episode_steps=STEPS, seed=3, target=info_target("belief"))
    for policy in ("random", "sample"):
        a = collect_rollouts(module, make_env, policy=policy, stream=STREAM_A, **kwargs)
        again = collect_rollouts(module, make_env, policy=policy, stream=STREAM_A, **kwargs)
        b = collect_rollouts(module, make_env, policy=policy, stream=STREAM_B, **kwargs)
        np.testing.assert_array_equal(a.actions, again.actions)
        assert not np.array_equal(a.actions, b.actions), policy
