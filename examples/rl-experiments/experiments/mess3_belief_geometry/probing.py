"""What every analysis of the study shares, so that their numbers compare: the probe's
settings, the analysis env, the rollout settings and the untrained control.

`analysis.py` (the in-run analysis; for a finished run `rl-harness analyze` runs its stages),
`controls.py`, `incremental.py`, `yardstick.py` and `interventions.py` read these; none of them
imports another analysis module but `analysis.py`, which imports them all, and
`incremental.py`, which reads `controls.py`'s run helpers and data sets (one way: controls.py
never imports it).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from typing import Any

import torch
from ray.rllib.core.rl_module.rl_module import RLModule, RLModuleSpec

from experiments.mess3_belief_geometry import task
from experiments.mess3_belief_geometry.spec import Budget
from rl_harness import Metric
from rl_harness.analysis import info_target, rllib_action_transform
from rl_harness.envs.hmm import HMMVectorEnv

BRANCH_K = 2  # within-branch R²: steps grouped by their last 2 visible tokens (as stack-2)
ACTION_BINS = 3  # action-conditioned branches: each action coordinate in 3 quantile bins
TOKEN_BRANCHES = "tokens_2"  # the branching names in probe_metrics.json
ACTION_BRANCHES = "tokens_actions_2"
PROBE_RIDGE = 1e-6
PROBE_TEST_FRACTION = 0.25
BELIEF_NAMES = ["decision_belief_0", "decision_belief_1", "decision_belief_2"]
# The analysis steps its episodes one token at a time: two intra-op threads buy little on such
# small ops, and on shared cores their spin-waits cost far more (measured: the study README).
ANALYSIS_TORCH_THREADS = 1
# Replays read 64 steps per module call (the agent's chunk length; `replay_rollouts(...,
# steps_per_call=)`): the same windowed attention as one step at a time, equal to it up to
# float rounding, in 64 times fewer calls (issue 53). Acting is still one step at a time.
REPLAY_STEPS = 64


def probe_env_factory(decision_belief_in_observation: bool, point: task.TaskPoint = task.FLAGSHIP):
    """The analysis' env factory (num_envs -> HMMVectorEnv) at `point`: decision beliefs in
    info, every episode EPISODE_LENGTH long."""
    config = task.env_config(
        ["decision_belief"],
        decision_belief_in_observation=decision_belief_in_observation,
        random_first_episode_length=False,
        point=point,
    )
    return functools.partial(HMMVectorEnv, env_config=config)


def rollout_settings(plan: Budget, seed: int, make_env: Any, action_space: Any) -> dict:
    """collect_rollouts' settings for every analysis rollout but the sizes (n_episodes,
    episode_steps): the same seeds, warm-up, targets, batching and action transform, so
    the first episodes and steps of two collections with different sizes agree."""
    return {
        "make_env": make_env,
        "warmup_steps": plan.warmup_steps,
        "seed": seed,
        "target": info_target("decision_belief"),
        # Every episode of a data set in one batch (issue 53): one module and env step per
        # time step for all of them. Each episode keeps its own reset seed and env streams.
        "num_envs": plan.probe_episodes,
        # Where the module only reads (an actor's or random play), it reads afterwards.
        "replay_steps": REPLAY_STEPS,
        # RLlib's default Box handling: the module acts in [-1, 1], the env gets the box.
        "action_transform": rllib_action_transform(action_space),
    }


def untrained_module(spec: RLModuleSpec, make_env: Any, seed: int) -> RLModule:
    """The same architecture with fresh, seeded weights: a control for the probe."""
    env = make_env(1)
    spec = dataclasses.replace(
        spec,
        observation_space=env.single_observation_space,
        action_space=env.single_action_space,
    )
    env.close()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return spec.build()


def value(block: Mapping[str, Any] | None, *path: str) -> float | None:
    """The "value" of an estimate record at `path` in `block` (None where it is missing)."""
    for key in path:
        block = block.get(key) if isinstance(block, Mapping) else None
    return block.get("value") if isinstance(block, Mapping) else None


def estimate(block: Mapping[str, Any] | None, *path: str) -> Metric:
    """The estimate record {value, low, high} at `path` in `block` as a named result's
    `Metric` (its value None where it is missing, as `value` reads it)."""
    for key in path:
        block = block.get(key) if isinstance(block, Mapping) else None
    if not isinstance(block, Mapping):
        return Metric(None)
    return Metric(block.get("value"), low=block.get("low"), high=block.get("high"))
