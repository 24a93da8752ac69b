"""`HMMEnv`: one copy of a finite-HMM process as a `gymnasium.Env`.

It runs the same batched core as `HMMVectorEnv` with a single copy, so N `HMMEnv`s seeded
s, s+1, ... produce exactly the trajectories of `HMMVectorEnv(N)` reset with seed s.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import numpy as np

from rl_harness.envs.hmm.config import HMMEnvConfig, resolve_config
from rl_harness.envs.hmm.simulator import BatchSimulator, Observation


def _scalar_info(info: dict[str, Any]) -> dict[str, Any]:
    """Copy 0 of a vector-form info, as plain Python scalars / (n_states,) arrays."""
    single: dict[str, Any] = {}
    for key, value in info.items():
        if key.startswith("_"):
            continue
        if isinstance(value, dict):
            single[key] = _scalar_info(value)
        elif value.ndim == 1:
            single[key] = value[0].item()
        else:
            single[key] = value[0]
    return single


def _first(obs: Observation) -> Observation:
    """Copy 0 of a batched observation (flat array or, with dict_observation, a dict)."""
    if isinstance(obs, dict):
        return {name: value[0] for name, value in obs.items()}
    first: np.ndarray = obs[0]
    return first


class HMMEnv(gym.Env[Observation, Any]):
    """A finite-HMM env: hidden state, tokens, history, exact belief; a task sets the reward.

    The observation is a flat float32 vector laid out by `self.layout`. Episodes never
    terminate; they are truncated after `episode_length` steps (the first one after seeding
    may be shorter with `random_first_episode_length`).
    """

    metadata = {"render_modes": []}

    def __init__(self, env_config: Mapping[str, Any] | HMMEnvConfig | None = None, **kwargs: Any):
        self.config = resolve_config(env_config, kwargs)
        self._sim = BatchSimulator(self.config, 1)
        self.model = self._sim.model
        self.task = self._sim.task
        self.layout = self._sim.layout
        # {name: (slice, shape)}: `split_observation(flat_obs, env.parts)` gives the Dict form.
        self.parts = self._sim.parts
        self.observation_space = self._sim.observation_space
        self.action_space = self._sim.action_space
        self._started = False

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Observation, dict[str, Any]]:
        if options:
            raise ValueError(f"HMMEnv.reset takes no options, got {sorted(options)}")
        super().reset(seed=seed)
        obs, info = self._sim.reset([seed])
        self._started = True
        return _first(obs), _scalar_info(info)

    def step(self, action: Any) -> tuple[Observation, float, bool, bool, dict[str, Any]]:
        if not self._started:
            raise RuntimeError("call reset() before step()")
        if self._sim.needs_reset[0]:
            raise RuntimeError("the episode has ended; call reset() before stepping again")
        actions = self._sim.check_actions(action, single=True)
        obs, rewards, terminated, truncated, info = self._sim.step(actions)
        return (
            _first(obs),
            float(rewards[0]),
            bool(terminated[0]),
            bool(truncated[0]),
            _scalar_info(info),
        )
