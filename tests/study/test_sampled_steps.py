"""Env steps per PPO iteration, counted by RLlib's own env runner (no Ray) as PPO's
`training_step` counts them: with the CPU plan's one local env runner,
`synchronous_parallel_sample` makes one `sample()` of `rollout_fragment_length` "auto"
(train batch / num_envs) x num_envs steps and sums the runner's NUM_ENV_STEPS_SAMPLED.

RLlib counts, per vector step, the copies that stepped: a copy whose episode ended is reset
on its next vector step, which counts nothing for it, and `sample()` stops at the first
vector step that reaches the batch. So a sample with r such resets counts
batch + (-r mod num_envs) steps. When each copy's share of the batch is a whole number of
episodes, every copy resets exactly that many times per sample (its first, shorter episode
included) and the count is the batch exactly: the action-symmetry study's budgets are set
so (docs/migrating.md, "Env steps per iteration")."""

from __future__ import annotations

import dataclasses
import importlib

import pytest
from experiments.mess3_action_symmetry import spec
from experiments.mess3_action_symmetry.task import EPISODE_LENGTH
from ray.rllib.env.single_agent_env_runner import SingleAgentEnvRunner
from ray.rllib.utils.metrics import NUM_ENV_STEPS_SAMPLED


def _counted(plan: spec.Budget, samples: int, seed: int = 0) -> list[tuple[int, int]]:
    """(env steps PPO counts, copies reset within the sample) of each iteration's sample."""
    config = spec.ppo_config(plan, variant=2, delay=1)
    config.env_runners(num_env_runners=0)  # the CPU plan: sampling in the driver
    config.debugging(seed=seed)
    runner = SingleAgentEnvRunner(config=config)
    try:
        counted = []
        for index in range(samples):
            episodes = runner.sample()  # what synchronous_parallel_sample calls
            steps = int(runner.get_metrics()[NUM_ENV_STEPS_SAMPLED])
            assert steps == sum(len(episode) for episode in episodes)
            # Episodes begun in this sample; the first sample's initial resets come before
            # its first vector step (not a step of the loop).
            begun = sum(episode.t_started == 0 for episode in episodes)
            counted.append((steps, begun - (plan.num_envs if index == 0 else 0)))
        return counted
    finally:
        runner.stop()


@pytest.mark.parametrize("leaf", ["variant_2", "variant_2_no_delay"])
def test_every_budget_gives_each_copy_whole_episodes_per_batch(leaf):
    recipe = importlib.import_module(f"experiments.mess3_action_symmetry.{leaf}.experiment")
    for plan in recipe.RECIPE.budgets.values():
        assert plan.train_batch % (plan.num_envs * EPISODE_LENGTH) == 0


def test_the_smoke_counts_exactly_its_batch_in_every_iteration():
    # The smoke's 2 iterations and one more: each copy's first episode (random length) ends
    # inside the first sample, later ones span whole samples.
    counted = _counted(spec.SMOKE, samples=3)
    assert [steps for steps, _ in counted] == [2048, 2048, 2048]
    assert [resets for _, resets in counted] == [2, 2, 2]  # one per copy per sample


def test_sixteen_copies_overshoot_by_the_uncounted_resets():
    # The smoke's former setting: 128 steps per copy per batch, an eighth of an episode, so
    # the resets in a sample vary and the last vector step overshoots the batch.
    plan = dataclasses.replace(spec.SMOKE, num_envs=16)
    counted = _counted(plan, samples=4)
    for steps, resets in counted:
        assert steps == 2048 + (-resets) % 16
    assert any(steps > 2048 for steps, _ in counted), counted
