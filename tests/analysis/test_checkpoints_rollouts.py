"""Module-only loading against the full Algorithm, and rollouts through the batched env."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rl_harness.analysis import (
    ModuleStepper,
    RunArtifacts,
    collect_rollouts,
    info_target,
    load_algorithm,
    load_module,
    module_checkpoint_dir,
)
from rl_harness.envs.hmm import HMMVectorEnv
from tests.analysis.conftest import ENV_CONFIG, EPISODE_LENGTH


@pytest.fixture(scope="module")
def checkpoint(tiny_run):
    return RunArtifacts.open(tiny_run.results_dir).final_checkpoint()


@pytest.fixture(scope="module")
def module(checkpoint):
    return load_module(checkpoint)


def make_env(num_envs: int) -> HMMVectorEnv:
    return HMMVectorEnv(num_envs, ENV_CONFIG)


def test_module_checkpoint_layout(checkpoint):
    path = module_checkpoint_dir(checkpoint)
    assert path == checkpoint / "learner_group" / "learner" / "rl_module" / "default_policy"
    with pytest.raises(FileNotFoundError, match="holds \\['default_policy'\\]"):
        module_checkpoint_dir(checkpoint, "other_policy")


def test_module_only_load_acts_like_the_full_algorithm(checkpoint, module):
    algo = load_algorithm(checkpoint)
    try:
        full = algo.get_module()
        for key, value in full.state_dict().items():
            torch.testing.assert_close(module.state_dict()[key], value, rtol=0, atol=0)
        # RLlib's own env runner acts greedily on fresh episodes (its connectors carry the
        # GRU state); replaying the same observations through the module-only load must
        # choose the same actions at every step.
        episodes = algo.env_runner.sample(num_episodes=4, explore=False, force_reset=True)
    finally:
        algo.stop()
    assert len(episodes) >= 4
    for episode in episodes[:4]:
        obs, actions = episode.get_observations(), episode.get_actions()
        assert len(actions) == EPISODE_LENGTH
        stepper = ModuleStepper(module, 1)
        replayed = [stepper.step(obs[t][None])[0][0] for t in range(len(actions))]
        np.testing.assert_array_equal(np.asarray(replayed), np.asarray(actions))


def test_rollouts_record_representations_and_beliefs(module):
    kwargs = dict(n_episodes=6, episode_steps=EPISODE_LENGTH, seed=5, target=info_target("belief"))
    rollouts = collect_rollouts(module, make_env, num_envs=4, **kwargs)
    assert rollouts.representations.shape == (6, EPISODE_LENGTH, 8)
    assert rollouts.targets.shape == (6, EPISODE_LENGTH, 3)
    assert rollouts.actions.shape == rollouts.rewards.shape == (6, EPISODE_LENGTH)
    np.testing.assert_array_equal(rollouts.episode_ids, np.arange(6))
    np.testing.assert_allclose(rollouts.targets.sum(-1), 1.0)
    np.testing.assert_allclose(rollouts.targets[:, 0], 1 / 3)  # the reset belief is uniform
    assert set(np.unique(rollouts.rewards)) <= {0.0, 1.0}

    # Stepping with the carried state equals encoding each whole episode at once.
    obs = torch.as_tensor(rollouts.observations)
    with torch.no_grad():
        whole = module.encode({"obs": obs}).numpy()
    np.testing.assert_allclose(rollouts.representations, whole, atol=1e-5)

    # Episode seeds come from named streams: batching does not change any episode (up to
    # float rounding of batch-size-dependent kernels), and the first episodes of a longer
    # collection are the same episodes.
    regrouped = collect_rollouts(module, make_env, num_envs=5, **kwargs)
    np.testing.assert_allclose(rollouts.representations, regrouped.representations, atol=1e-6)
    np.testing.assert_array_equal(rollouts.targets, regrouped.targets)
    longer = collect_rollouts(module, make_env, num_envs=4, **(kwargs | {"n_episodes": 8}))
    np.testing.assert_array_equal(longer.targets[:6], rollouts.targets)
    other = collect_rollouts(module, make_env, num_envs=4, **(kwargs | {"seed": 6}))
    assert not np.array_equal(other.targets, rollouts.targets)


def test_exploring_rollouts_are_seeded_and_leave_torch_rng_alone(module):
    kwargs = dict(n_episodes=4, episode_steps=8, seed=1, target=info_target("belief"))
    before = torch.random.get_rng_state()
    first = collect_rollouts(module, make_env, policy="sample", **kwargs)
    assert torch.equal(torch.random.get_rng_state(), before)
    second = collect_rollouts(module, make_env, policy="sample", **kwargs)
    np.testing.assert_array_equal(first.actions, second.actions)


def test_rollout_errors_name_the_problem(module):
    with pytest.raises(KeyError, match="no 'state'"):
        collect_rollouts(
            module, make_env, n_episodes=1, episode_steps=2, seed=0, target=info_target("state")
        )
    with pytest.raises(ValueError, match="before warmup_steps \\+ episode_steps = 20"):
        collect_rollouts(
            module, make_env, n_episodes=1, episode_steps=20, seed=0, target=info_target("belief")
        )
